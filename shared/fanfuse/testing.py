"""Test doubles that the benchmark and the tests share: a stub SearXNG server on 127.0.0.1.

A library module, not a tests/ one, because `fanfuse bench latency` runs against it from an
installed package; it imports nothing beyond the standard library and the settings model.

The stub answers each platform after a fixed delay (`/delay/{s}`), which is what the benchmark
measures against. It also serves the end-to-end tests: it answers with an HTTP status
(`/status/{code}`), a malformed body (`/malformed`), or only once a named gate is released
(`/gate/{name}`).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fanfuse.settings import ExtraPlatform

RESULTS_PER_PAGE = 10
GATE_TIMEOUT = 60.0
"""A gated request answers anyway after this long, so a forgotten gate cannot hang a test run."""


class StubSearxServer:
    """SearXNG-shaped JSON answers on 127.0.0.1, behaviour chosen by the base URL's path.

    Point a `searxng` platform's `base_url` at `url("delay/0.5")`, `url("status/500")`,
    `url("malformed")` or `url("gate/NAME")`; the adapter appends `/search`. Page 1 carries
    RESULTS_PER_PAGE hits (half of them URLs every platform shares, so fusion has work to do);
    later pages are empty and immediate, so one search is one delayed call.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.requests: Counter[str] = Counter()
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
        for event in gates:
            event.set()

    def waiting(self, name: str) -> int:
        """Requests that reached gate `name` so far."""
        return self.requests[f"gate/{name}"]

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
        parts = [p for p in path.split("/") if p]
        if parts and parts[-1] == "search":
            parts = parts[:-1]
        kind = parts[0] if parts else ""
        key = "/".join(parts)
        page = int((query.get("pageno") or ["1"])[0])
        if page == 1:
            with self._lock:
                self.requests[key] += 1
        q = (query.get("q") or [""])[0]
        if kind == "delay" and len(parts) == 2:
            if page == 1:
                time.sleep(float(parts[1]))
            return 200, _results(key, q, page)
        if kind == "status" and len(parts) == 2:
            return int(parts[1]), json.dumps({"error": f"stub status {parts[1]}"}).encode()
        if kind == "malformed":
            return 200, b"<html>this is not JSON</html>"
        if kind == "gate" and len(parts) == 2:
            if page == 1:
                self.gate(parts[1]).wait(GATE_TIMEOUT)
            return 200, _results(key, q, page)
        return 404, b'{"error": "unknown stub path"}'

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


def _results(key: str, query: str, page: int) -> bytes:
    label = key.replace("/", "-")
    results = []
    if page == 1:
        for i in range(1, RESULTS_PER_PAGE + 1):
            url = f"https://stub.test/shared/{i}" if i % 2 else f"https://stub.test/{label}/{i}"
            results.append(
                {
                    "url": url,
                    "title": f"{query} result {i} ({label})",
                    "content": f"Stub answer {i} for {query!r} from {label}.",
                    "engine": "stub",
                    "score": 1.0 / i,
                }
            )
    data = {"query": query, "number_of_results": len(results), "results": results}
    return json.dumps(data).encode()


def stub_platforms(
    stub: StubSearxServer, delays: Sequence[float], prefix: str = "stub"
) -> dict[str, ExtraPlatform]:
    """One `searxng` platform per delay (`stub_0_2` answers after 0.2 s); no retries."""
    out: dict[str, ExtraPlatform] = {}
    for delay in delays:
        name = f"{prefix}_{delay:g}".replace(".", "_")
        out[name] = ExtraPlatform(
            engine="searxng",
            settings={"base_url": stub.url(f"delay/{delay:g}"), "max_attempts": 1},
        )
    return out


def extra_platforms_env(platforms: dict[str, ExtraPlatform]) -> str:
    """The `FANFUSE_EXTRA_PLATFORMS` value that declares `platforms` in another process."""
    return json.dumps({name: spec.model_dump() for name, spec in platforms.items()})
