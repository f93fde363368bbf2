"""Test doubles that the benchmark and the tests share: a stub SearXNG server on 127.0.0.1.

A library module, not a tests/ one, because `fanfuse bench latency` and `fanfuse bench cache` run
against it from an installed package; it imports nothing beyond the standard library and the
settings model.

The stub answers each platform after a fixed delay (`/delay/{s}`), which is what the benchmarks
measure against, or with a slow tail (`/tail/{n}:{s}`: every n-th request waits s seconds more:
`fanfuse bench hedging`). It also serves the end-to-end tests: it answers with an HTTP status
(`/status/{code}`), a malformed body (`/malformed`), only once a named gate is released
(`/gate/{name}`), with HTTP 500 for the queries that contain a marker (`/fail-query/{marker}`),
with results on chosen hosts (`/domains/{host,host}`), or with tracking parameters on the shared
URLs (`/tracked`). See `StubSearxServer` for how they combine.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from fanfuse.wire.instances import ExtraPlatform

RESULTS_PER_PAGE = 10
GATE_TIMEOUT = 60.0
"""A gated request answers anyway after this long, so a forgotten gate cannot hang a test run."""
DATE_STEP_DAYS = 2
"""Result i on chosen hosts (`/domains/...`) was published (i - 1) * DATE_STEP_DAYS days ago."""

STEPS = {
    "delay": 1,
    "tail": 1,
    "gate": 1,
    "status": 1,
    "malformed": 0,
    "fail-query": 1,
    "domains": 1,
    "tracked": 0,
}
"""The path grammar's words and how many path segments each takes as its argument."""

Step = tuple[str, str]


class StubSearxServer:
    """SearXNG-shaped JSON answers on 127.0.0.1, behaviour chosen by the base URL's path.

    Point a `searxng` platform's `base_url` at `url(...)` of a behaviour; the adapter appends
    `/search`. A behaviour is a sequence of steps, each a word and its argument:

        delay/{seconds}      wait, then answer
        tail/{n}:{seconds}   every n-th request on this path waits that much longer
        gate/{name}          wait until the test releases gate `name`, then answer
        status/{code}        answer HTTP `code` with an error body
        malformed            answer 200 with a body that is not JSON
        fail-query/{marker}  answer HTTP 500 to a query that contains `marker`
        domains/{h1,h2,...}  results on those hosts, in turn, each with a `publishedDate`
        tracked              the shared URLs carry `?utm_source=stub`: the same pages as the
                             other platforms', under another spelling (fused as URL variants)

    Waits come first, in order; then the first of status, malformed or a matching fail-query
    decides the answer; else the results. So `fail-query/zz500/delay/0.2` answers after 0.2 s,
    with 500 for "other zz500" and results for "permittivity". An unknown word or a missing
    argument is a 404.

    Page 1 carries RESULTS_PER_PAGE hits (without `domains`, half of them URLs every platform
    shares, so fusion has work to do); later pages are empty and immediate, so one search is
    one delayed call. `requests` counts page-1 requests per behaviour path, and `arrivals`
    holds when each arrived (`time.monotonic()`: a test in this process measures another
    process's search from the moment its platforms were called).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.requests: Counter[str] = Counter()
        self.arrivals: dict[str, list[float]] = {}
        self._gates: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def url(self, behaviour: str) -> str:
        return f"{self.base}/{behaviour.strip('/')}"

    def gate(self, name: str) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(name, threading.Event())

    def release(self, name: str) -> None:
        self.gate(name).set()

    def reset(self) -> None:
        """Release every waiting request, then start over with closed gates and no counts."""
        with self._lock:
            gates, self._gates = list(self._gates.values()), {}
            self.requests.clear()
            self.arrivals.clear()
        for event in gates:
            event.set()

    def waiting(self, name: str) -> int:
        """Requests that reached gate `name` so far (on any path with that gate)."""
        with self._lock:
            counts = list(self.requests.items())
        return sum(n for key, n in counts if ("gate", name) in (parse_steps(key) or []))

    def start(self) -> StubSearxServer:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.reset()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> StubSearxServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, bytes]:
        parts = [unquote(p) for p in path.split("/") if p]
        if parts and parts[-1] == "search":
            parts = parts[:-1]
        key = "/".join(parts)
        page = int((query.get("pageno") or ["1"])[0])
        nth = 0
        if page == 1:
            with self._lock:
                self.requests[key] += 1
                nth = self.requests[key]
                self.arrivals.setdefault(key, []).append(time.monotonic())
        steps = parse_steps(key)
        if steps is None:
            return 404, b'{"error": "unknown stub path"}'
        q = (query.get("q") or [""])[0]
        for word, arg in steps:
            if page == 1 and word == "delay":
                time.sleep(float(arg))
            elif page == 1 and word == "tail":
                every, seconds = arg.split(":")
                if nth % int(every) == 0:
                    time.sleep(float(seconds))
            elif page == 1 and word == "gate":
                self.gate(arg).wait(GATE_TIMEOUT)
        for word, arg in steps:
            if word == "status":
                return int(arg), json.dumps({"error": f"stub status {arg}"}).encode()
            if word == "malformed":
                return 200, b"<html>this is not JSON</html>"
            if word == "fail-query" and arg in q:
                return 500, json.dumps({"error": f"stub failure for {arg!r}"}).encode()
        hosts = next((arg.split(",") for word, arg in steps if word == "domains"), None)
        tracked = any(word == "tracked" for word, _ in steps)
        return 200, _results(key, q, page, hosts, tracked=tracked)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; with Nagle on, the body waits for the
            # client's delayed ACK of the headers (~40 ms on Linux), which the bench would count.
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                status, body = stub._answer(parts.path, parse_qs(parts.query))
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout, a cancelled search): nothing to do

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler


def parse_steps(key: str) -> list[Step] | None:
    """`"fail-query/zz500/delay/0.2"` -> `[("fail-query", "zz500"), ("delay", "0.2")]`; None when
    the path is not in the grammar (see `StubSearxServer`)."""
    parts = [p for p in key.split("/") if p]
    steps: list[Step] = []
    i = 0
    while i < len(parts):  # every turn consumes at least one part
        word = parts[i]
        arity = STEPS.get(word)
        if arity is None or i + arity >= len(parts):  # an unknown word, a missing argument
            return None
        arg = parts[i + 1] if arity else ""
        if not _valid(word, arg):
            return None
        steps.append((word, arg))
        i += 1 + arity
    return steps or None


def _valid(word: str, arg: str) -> bool:
    try:
        if word == "delay":
            return float(arg) >= 0
        if word == "status":
            return 100 <= int(arg) <= 599
        if word == "tail":
            every, seconds = arg.split(":")
            return int(every) >= 1 and float(seconds) >= 0
    except ValueError:
        return False
    if word == "domains":
        return all(arg.split(","))
    return True


def _results(
    key: str, query: str, page: int, hosts: list[str] | None = None, *, tracked: bool = False
) -> bytes:
    label = key.replace("/", "-").replace(",", "+")
    now = datetime.now(UTC).replace(microsecond=0)
    results: list[dict[str, Any]] = []
    if page == 1:
        for i in range(1, RESULTS_PER_PAGE + 1):
            result: dict[str, Any] = {
                "title": f"{query} result {i} ({label})",
                "content": f"Stub answer {i} for {query!r} from {label}.",
                "engine": "stub",
                "score": 1.0 / i,
            }
            if hosts:
                result["url"] = f"https://{hosts[(i - 1) % len(hosts)]}/{label}/{i}"
                published = now - timedelta(days=(i - 1) * DATE_STEP_DAYS)
                result["publishedDate"] = published.isoformat()
            elif i % 2:
                result["url"] = f"https://stub.test/shared/{i}" + (
                    "?utm_source=stub" if tracked else ""
                )
            else:
                result["url"] = f"https://stub.test/{label}/{i}"
            results.append(result)
    data = {"query": query, "number_of_results": len(results), "results": results}
    return json.dumps(data).encode()


def stub_platforms(
    stub: StubSearxServer,
    delays: Sequence[float],
    prefix: str = "stub",
    max_concurrency: int | None = None,
) -> dict[str, ExtraPlatform]:
    """One `searxng` platform per delay (`stub_0_2` answers after 0.2 s); no retries; calls in
    flight per process: `max_concurrency`, else searxng's default."""
    out: dict[str, ExtraPlatform] = {}
    for delay in delays:
        name = f"{prefix}_{delay:g}".replace(".", "_")
        settings: dict[str, Any] = {"base_url": stub.url(f"delay/{delay:g}"), "max_attempts": 1}
        if max_concurrency is not None:
            settings["max_concurrency"] = max_concurrency
        out[name] = ExtraPlatform(engine="searxng", settings=settings)
    return out


def extra_platforms_env(platforms: dict[str, ExtraPlatform]) -> str:
    """The `FANFUSE_EXTRA_PLATFORMS` value that declares `platforms` in another process."""
    return json.dumps({name: spec.model_dump() for name, spec in platforms.items()})
