"""moto's server in a thread on 127.0.0.1: the local AWS endpoint (DynamoDB, SQS) of the tests
and of `fanfuse dev --cloud aws`.

moto's own `ThreadedMotoServer` answers each request in a thread of its own, and its DynamoDB
backend checks a condition and then writes, unlocked: two conditional writes to one item at the
same moment can both pass, which DynamoDB never allows (a single item's writes, and a
transaction's, are atomic). Here DynamoDB requests go one at a time, which is that guarantee and
no more: clients still interleave between their reads and their conditional writes, as they do
on AWS. Other services stay concurrent (an SQS long poll must not hold DynamoDB up).

moto is a development dependency (the dev extra): imported only when a server starts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import httpx

from fanfuse.devstack.processes import LOOPBACK

if TYPE_CHECKING:
    from werkzeug.serving import BaseWSGIServer

Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
RESET_TIMEOUT_S = 10.0


class SerialDynamoDB:
    """WSGI middleware: DynamoDB requests (X-Amz-Target `DynamoDB_...`) one at a time."""

    def __init__(self, app: Wsgi) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if not str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith("DynamoDB"):
            return list(self.app(environ, start_response))
        with self.lock:
            return list(self.app(environ, start_response))  # the whole answer, still locked


class MotoServer:
    """moto's server (every backend) on LOOPBACK, in a daemon thread; `port=0`: a free one."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        if self._server is None:
            raise RuntimeError("the moto server is not started")
        return f"http://{LOOPBACK}:{self._server.server_port}"

    def start(self) -> MotoServer:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        app = SerialDynamoDB(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(
            LOOPBACK, self.port, app, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="moto-server", daemon=True
        )
        self._thread.start()
        return self

    def reset(self) -> None:
        """Every backend back to empty (tables, queues): moto's reset API."""
        httpx.post(f"{self.endpoint}/moto-api/reset", timeout=RESET_TIMEOUT_S).raise_for_status()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(RESET_TIMEOUT_S)
        self._server = self._thread = None
