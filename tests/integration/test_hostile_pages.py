"""Hostile result pages on 127.0.0.1 cost one result, never a worker, a run or a platform.

The acceptance of issue 19, item 1: a gzip-in-gzip page and a brotli bomb (1 GiB decoded each)
keep the process that fetches them under 400 MB of RSS and end as that result's `fetch_error`
(the per-result content error); `charset=idna`, `charset=punycode` on a 400 KB page and a label
nobody knows each give the result content or a `fetch_error`, the platform run `succeeded`, in
under 2 s; and such pages never count against the platform's breaker.

The bombs are fetched by a real `fanfuse search --content` in a child process, whose own peak
RSS `os.wait4` reports (the test process's memory, and other children's, do not count). Before
the fix the same child peaked at 2.2 GB for either bomb; `charset=idna` failed the platform and
`charset=punycode` held the event loop for 76 s (tests/support/hostile_pages.py prints the figures).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from fanfuse.net.runner import Runner
from fanfuse.platforms import Registry
from fanfuse.platforms.searxng import SearxngPlatform
from fanfuse.rules.breaker import FAILURES_TO_OPEN
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.models import BreakerState, PlatformState
from tests.support.hostile_pages import (
    ARTICLE,
    Page,
    hostile_pages,
    outcome,
    platform_run,
    run_cli_search,
    serve_pages,
)

pytestmark = pytest.mark.timeout(300)

MAX_RSS = 400 * 1024 * 1024
BOMBS = ["gzip_in_gzip", "brotli_bomb"]
CHARSETS = ["idna", "punycode", "unknown_label"]
TIME_BOUND_S = 2.0
TRIES = 2


@pytest.mark.parametrize("name", BOMBS)
def test_a_bomb_costs_one_result_and_keeps_the_process_small(
    name: str, server: HTTPServer, tmp_path: Path
) -> None:
    pages = {name: hostile_pages()[name], "article": article()}
    urls = serve_pages(server, pages)
    run = run_cli_search(server, tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert platform_run(run.view)["state"] == "succeeded"
    content, error = outcome(run.view, urls[name])
    assert content is None and error, (content, error)
    if name == "gzip_in_gzip":
        assert "stacked content codings (gzip, gzip)" in error
    article_content, article_error = outcome(run.view, urls["article"])
    assert article_error is None and article_content and "transformer" in article_content
    assert run.max_rss < MAX_RSS, f"{run.max_rss / 1e6:.0f} MB"


def article() -> Page:
    return Page("/article", ARTICLE.encode(), {"Content-Type": "text/html; charset=utf-8"})


async def test_hostile_charsets_cost_one_result_fast_and_never_the_breaker(
    server: HTTPServer, runner: Runner, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page searched twice and the quicker search timed (a page slow by design is slow
    both times; a busy machine's stall seldom hits both: one search once outran the bound at
    load 9-12); the bound is 2 s, or 3x the same page served as plain UTF-8 in this run,
    timed the same way, when the machine is so loaded that this baseline itself takes long."""
    monkeypatch.setenv("FANFUSE_CONTENT_ALLOW_LOOPBACK", "true")
    settings.content = Settings().content  # the tree reads its sections when it is built
    pages = hostile_pages()
    baseline = Page("/baseline", pages["punycode"].body, {"Content-Type": "text/html"})
    served = {name: pages[name] for name in CHARSETS} | {"baseline": baseline}
    platforms, urls = [], {}
    for name, page in served.items():
        urls[name] = serve_pages(server, {name: page}, prefix=f"/{name}")[name]
        base = server.url_for(f"/{name}").rstrip("/")
        platforms.append(SearxngPlatform(name=f"web_{name}", overrides={"base_url": base}))
    store = SqliteStore(settings.db_path)
    async with EmbeddedRuntime(
        settings, registry=Registry.of(platforms), store=store, runner=runner
    ) as rt:

        async def search(name: str) -> tuple[float, PlatformState, str | None, str | None]:
            started = time.monotonic()
            view = await rt.search(
                {"query": "q", "platform": [f"web_{name}"], "include_content": True,
                 "cache": "bypass"}
            )  # fmt: skip
            elapsed = time.monotonic() - started
            run = view.platform_runs[0]
            hit = next((h for h in run.results if h.url == urls[name]), None)
            fused = next((r for r in view.results if r.url == urls[name]), None)
            error = hit.metadata.get("fetch_error") if hit is not None else run.error
            return elapsed, run.state, fused.content if fused else None, error

        async def quicker(name: str, *, readable: bool = False) -> float:
            """The quicker of TRIES searches of page `name`, each costing one result at most
            (`readable`: none; the page's content comes through)."""
            timings = []
            for _ in range(TRIES):
                elapsed, state, content, error = await search(name)
                assert state is PlatformState.SUCCEEDED, (name, error)
                assert content if readable else (content or error), (name, error)
                timings.append(elapsed)
            return min(timings)

        await search("baseline")  # the first loads trafilatura: not part of the baseline
        base_s = await quicker("baseline", readable=True)
        bound = max(TIME_BOUND_S, 3 * base_s)
        for name in CHARSETS:
            elapsed = await quicker(name)
            assert elapsed < bound, f"{name}: {elapsed:.2f} s (baseline {base_s:.2f} s)"
        for _ in range(FAILURES_TO_OPEN):
            _, state, _, _ = await search("idna")
            assert state is PlatformState.SUCCEEDED
        health = store.get_health().get("web_idna")
        assert health is None or (
            health.state is BreakerState.CLOSED and health.consecutive_failures == 0
        )
