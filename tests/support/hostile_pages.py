"""Hostile result pages on 127.0.0.1, and a real `fanfuse search --content` that fetches them.

The pages are what an attacker who controls one search result can send: compression bombs
(a body that inflates ~350 000-fold, stacked `gzip, gzip` or one `br` layer), charset labels
that name a Python codec but no web encoding (`idna` raises, `punycode` is quadratic), a label
nobody knows, and a meta-refresh page that makes a backtracking regex explode.

`run_cli_search` runs the search in a child process (the CLI over the embedded runtime, the way
a user would) and has the child write its own peak RSS (`VmHWM` of its address space) as it
exits, so neither the test process's memory nor another child's counts. Not `wait4`'s
`ru_maxrss`: Linux carries the parent's high-water mark into a child across fork (or vfork)
and exec, so under a pytest that has loaded a model it read 900 MB for a child of 70.
`python tests/support/hostile_pages.py` prints the figures of the
issue for whichever fanfuse is first on PYTHONPATH (the before/after of the closing note).
"""

from __future__ import annotations

import functools
import json
import os
import resource
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_httpserver import HTTPServer
from werkzeug import Response

GIB = 1 << 30
CHUNK = bytes(1 << 20)
PUNYCODE_PAGE_BYTES = 400_000
REPO = Path(__file__).resolve().parents[2]


@functools.cache
def gzip_bomb(decoded: int = GIB) -> bytes:
    """One gzip layer of `decoded` zero bytes (~1 MB on the wire for 1 GiB)."""
    one = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(one.compress(CHUNK) for _ in range(decoded // len(CHUNK))) + one.flush()


@functools.cache
def gzip_in_gzip(decoded: int = GIB) -> bytes:
    """`decoded` zero bytes gzipped, then gzipped again: ~2 KB on the wire for 1 GiB."""
    outer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return outer.compress(gzip_bomb(decoded)) + outer.flush()


@functools.cache
def brotli_bomb(decoded: int = GIB) -> bytes:
    """One brotli layer of `decoded` zero bytes (~2 KB on the wire)."""
    import brotli

    squeeze = brotli.Compressor(quality=5)
    body = b"".join(squeeze.process(CHUNK) for _ in range(decoded // len(CHUNK)))
    tail: bytes = squeeze.finish()  # brotli has no type hints
    return body + tail


def punycode_page(size: int = PUNYCODE_PAGE_BYTES) -> bytes:
    """A page that Python's punycode codec decodes in time quadratic in its length: all after
    the last `-` is one run of code points to insert, each insertion copying the text so far
    (`999a` first lifts the code points out of Latin-1, so each copy is wider)."""
    head = b"<html><head><title>t</title></head><body><p>x-999a"
    return head + b"a" * (size - len(head))


def refresh_traps(size: int) -> dict[str, bytes]:
    """`size` bytes of meta-refresh pages made to be slow to scan, by shape:

    - `unclosed`: `<meta http-equiv=refresh content=0 ` over and over, no `url=` and no `>`:
      each start makes the old regex's `[^>]+ ... [^>]+` try every split of the rest;
    - `closed`: the same tags closed, so a scanner must read every one of them;
    - `one_tag`: a single `<meta http-equiv=refresh` with thousands of attributes;
    - `quotes`: a `content` value that opens a quote and never closes it, repeated.
    """

    def fill(unit: bytes, head: bytes = b"", tail: bytes = b"") -> bytes:
        room = size - len(head) - len(tail)
        return head + (unit * (room // len(unit) + 1))[:room] + tail

    return {
        "unclosed": fill(b"<meta http-equiv=refresh content=0 "),
        "closed": fill(b"<meta http-equiv=refresh content=0>"),
        "one_tag": fill(b' a="0;url=" ', head=b"<meta http-equiv=refresh", tail=b">"),
        "quotes": fill(b"<meta http-equiv='refresh' content='0;url=\" "),
    }


ARTICLE = (
    "<!doctype html><html><head><title>Attention</title></head><body><main><article>"
    "<h1>Attention explained</h1>"
    + "<p>The transformer replaces recurrence with attention, so every position of a sequence "
    "can look at every other position in one step. This makes training parallel.</p>"
    * 4
    + "</article></main></body></html>"
)


@dataclass(frozen=True)
class Page:
    path: str
    body: bytes
    headers: dict[str, str]


def hostile_pages() -> dict[str, Page]:
    """Every hostile page, by name (the bombs are built on first use and kept)."""
    html = "text/html"
    return {
        "gzip_in_gzip": Page(
            "/bomb/gzgz", gzip_in_gzip(), {"Content-Type": html, "Content-Encoding": "gzip, gzip"}
        ),
        "brotli_bomb": Page(
            "/bomb/br", brotli_bomb(), {"Content-Type": html, "Content-Encoding": "br"}
        ),
        "idna": Page(
            "/charset/idna", punycode_page(4_000), {"Content-Type": f"{html}; charset=idna"}
        ),
        "punycode": Page(
            "/charset/punycode", punycode_page(), {"Content-Type": f"{html}; charset=punycode"}
        ),
        "unknown_label": Page(
            "/charset/unknown",
            ARTICLE.encode(),
            {"Content-Type": f"{html}; charset=x-no-such-encoding"},
        ),
    }  # fmt: skip


def serve_pages(server: HTTPServer, pages: dict[str, Page], prefix: str = "") -> dict[str, str]:
    """The pages on `server`, and a SearXNG `{prefix}/search` listing them; URLs by name."""
    urls = {}
    for name, page in pages.items():
        server.expect_request(prefix + page.path).respond_with_response(
            Response(page.body, status=200, headers=page.headers)
        )
        urls[name] = server.url_for(prefix + page.path)
    results = [{"url": url, "title": name, "content": name} for name, url in urls.items()]
    server.expect_request(prefix + "/search").respond_with_data(
        json.dumps({"query": "q", "results": results}), content_type="application/json"
    )
    return urls


@dataclass(frozen=True)
class ChildRun:
    view: dict[str, Any]
    """The final task, as `fanfuse search --json` printed it."""
    max_rss: int
    """The child's peak resident set, in bytes."""
    seconds: float
    returncode: int
    stderr: str


PEAK_REPORTER = """
import atexit, runpy, sys
out = sys.argv.pop(1)
def report():
    with open('/proc/self/status') as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith('VmHWM:'))
    with open(out, 'w') as f:
        f.write(str(kib * 1024))
atexit.register(report)
sys.argv[0] = 'fanfuse'
runpy.run_module('fanfuse.cli.main', run_name='__main__')
"""
"""`python -c PEAK_REPORTER FILE ARGS...`: `fanfuse ARGS...`, writing its peak RSS in bytes (the
address space's own high-water mark, VmHWM) to FILE as it exits, sys.exit included."""


def run_cli_search(
    server: HTTPServer, workdir: Path, *, pythonpath: str | None = None, timeout_s: float = 120
) -> ChildRun:
    """`fanfuse search q -p searxng --content --json` in a child process against `server`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
    env.update(
        PYTHONPATH=pythonpath or str(REPO / "shared"),
        FANFUSE_SEARXNG_BASE_URL=server.url_for("/").rstrip("/"),
        FANFUSE_CONTENT_ALLOW_LOOPBACK="true",
        FANFUSE_DB_PATH=str(workdir / "fanfuse.db"),
        FANFUSE_CACHE_DIR=str(workdir / "cache"),
        NO_PROXY="127.0.0.1,localhost",
    )
    peak = workdir / "peak_rss"
    argv = [sys.executable, "-c", PEAK_REPORTER, str(peak), "search", "q", "-p", "searxng"]
    argv += ["--content", "--json", "--cache", "bypass", "--timeout", "60"]
    out, err = workdir / "stdout", workdir / "stderr"
    started = time.monotonic()
    with out.open("wb") as stdout, err.open("wb") as stderr:
        child = subprocess.Popen(argv, stdout=stdout, stderr=stderr, env=env, cwd=workdir)
        deadline = started + timeout_s
        while True:  # wait4 gives this child's own rusage; poll so a hang cannot block forever
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                child.kill()
                pid, status, usage = os.wait4(child.pid, 0)
                break
            time.sleep(0.05)
    child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    text = out.read_text(encoding="utf-8", errors="replace")
    view = json.loads(text) if text.strip().startswith("{") else {}
    del usage  # wait4 reaps; its ru_maxrss includes the parent's high-water mark (see above)
    max_rss = int(peak.read_text()) if peak.exists() else 0
    if not max_rss:
        raise AssertionError(f"the child reported no peak RSS: {err.read_text()[-2000:]}")
    return ChildRun(view, max_rss, seconds, child.returncode, err.read_text(errors="replace"))


def platform_run(view: dict[str, Any], platform: str = "searxng") -> dict[str, Any]:
    return next(r for r in view["platform_runs"] if r["name"] == platform)


def outcome(view: dict[str, Any], url: str) -> tuple[str | None, str | None]:
    """(content, fetch_error) of the result at `url`: the content from the fused results (the
    platform run's hits keep it in the contents store), the error from the run's hit."""
    none: dict[str, Any] = {}
    hit = next((h for h in platform_run(view).get("results") or [] if h["url"] == url), none)
    fused = next((r for r in view.get("results") or [] if r["url"] == url), none)
    return fused.get("content"), (hit.get("metadata") or {}).get("fetch_error")


def _measure(pythonpath: str, refresh_sizes: list[int]) -> None:
    """One child search per hostile page, and the meta-refresh scan, with their figures."""
    import logging
    import tempfile

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    sys.path.insert(0, pythonpath)
    from fanfuse.content import resolve

    only = [n for n in os.environ.get("HOSTILE_PAGES", "").split(",") if n]
    for name, page in hostile_pages().items():
        if only and name not in only:
            continue
        server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
        server.start()
        try:
            urls = serve_pages(server, {name: page})
            with tempfile.TemporaryDirectory() as tmp:
                run = run_cli_search(server, Path(tmp), pythonpath=pythonpath, timeout_s=300)
        finally:
            server.stop()
        run_doc = platform_run(run.view) if run.view else {"state": f"exit {run.returncode}"}
        content, error = outcome(run.view, next(iter(urls.values()))) if run.view else (None, None)
        print(
            f"{name:14} wire {len(page.body):>7} B  max RSS {run.max_rss / 1e6:8.1f} MB  "
            f"{run.seconds:6.2f} s  platform {run_doc.get('state')}  "
            f"content {len(content or '')} chars  fetch_error {error!r:.70}"
            + (f"  ERROR {run_doc.get('error')!r:.120}" if run_doc.get("error") else "")
        )
    shapes = [n for n in os.environ.get("REFRESH_TRAPS", "").split(",") if n]
    for size in refresh_sizes:
        for shape, body in refresh_traps(size).items():
            if shapes and shape not in shapes:
                continue
            started, cpu = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF).ru_utime
            resolve.meta_refresh_target(body)
            print(
                f"meta refresh {size // 1000} KB {shape:9}: {time.monotonic() - started:.4f} s "
                f"({resource.getrusage(resource.RUSAGE_SELF).ru_utime - cpu:.4f} s CPU)"
            )


if __name__ == "__main__":
    _measure(
        sys.argv[1] if len(sys.argv) > 1 else str(REPO / "shared"),
        [int(n) for n in sys.argv[2:]] or [25_000, 100_000],
    )
