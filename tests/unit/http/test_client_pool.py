"""The API client's pool ends an idle connection before the functions' server does.

gunicorn, under functions-framework, closes a connection after `keepalive` seconds idle; a
request the client sends on it at that moment is lost to a connection reset (the stack's load
run lost a few status polls so). The client must give up its idle connections first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread

import flask
import pytest
from functions_framework._http.gunicorn import GunicornApplication

from fanfuse.http.client import KEEPALIVE_EXPIRY, api_http


def test_the_pool_expires_idle_connections_before_functions_framework_closes_them() -> None:
    # functions-framework's GunicornApplication.__init__ is unannotated
    server = GunicornApplication(flask.Flask(__name__), "127.0.0.1", 0, False)  # type: ignore[no-untyped-call]
    assert server.cfg.keepalive > KEEPALIVE_EXPIRY


class ConnectionCounting(ThreadingHTTPServer):
    """A keep-alive HTTP/1.1 server that records each request's client port (one a connection)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.ports: list[int] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ConnectionCounting

    def do_GET(self) -> None:
        self.server.ports.append(self.client_address[1])
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the ports, not the log."""


@pytest.fixture
def counting() -> Iterator[ConnectionCounting]:
    server = ConnectionCounting()
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_a_connection_is_reused_while_fresh_and_replaced_once_idle_past_the_expiry(
    counting: ConnectionCounting,
) -> None:
    url = f"http://127.0.0.1:{counting.server_address[1]}/"

    async def three_requests() -> None:
        async with api_http(5.0) as http:
            await http.get(url)
            await http.get(url)  # at once: the same connection
            await asyncio.sleep(KEEPALIVE_EXPIRY + 0.2)
            await http.get(url)  # idle past the expiry: a new one

    started = time.monotonic()
    asyncio.run(three_requests())
    assert time.monotonic() - started < 5
    first, again, later = counting.ports
    assert first == again and later != first
