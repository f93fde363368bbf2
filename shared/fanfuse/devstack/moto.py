"""moto's server in a thread on 127.0.0.1: the local AWS endpoint (DynamoDB, SQS) of the tests
and of `fanfuse dev --cloud aws`.

moto's own `ThreadedMotoServer` answers each request in a thread of its own, and its DynamoDB
backend checks a condition and then writes, unlocked: two conditional writes to one item at the
same moment can both pass, which DynamoDB never allows (a single item's writes, and a
transaction's, are atomic). Here DynamoDB requests go one at a time, which is that guarantee and
no more: clients still interleave between their reads and their conditional writes, as they do
on AWS. Other services stay concurrent (an SQS long poll must not hold DynamoDB up).

`MotoProcess` runs one in a child process for the local AWS stack (`devstack.aws`), so it is
stopped, and guarded by the watchdog, like the other stacks' emulators.

moto is a development dependency (the dev extra): imported only when a server starts.
"""

from __future__ import annotations

import importlib.util
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from fanfuse.devstack.processes import (
    LOOPBACK,
    Component,
    ManagedProcess,
    default_log_dir,
    free_port,
    http_request,
    wait_until,
)

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


def serve_moto(port: int) -> None:
    """`python -m fanfuse.devstack moto --port N`: a MotoServer on 127.0.0.1:port until killed."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    server = MotoServer(port).start()
    print(f"moto on {server.endpoint}", flush=True)
    threading.Event().wait()


AWS_DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
}
"""What every process of the AWS stack gets: credentials moto accepts, and no instance metadata
lookup (botocore would otherwise try an address off this machine for credentials)."""


class MotoProcess(Component):
    """A MotoServer in a child process of its own (`serve_moto`), as a stack component: stopped
    with its process group and guarded by the stack's watchdog like the emulators."""

    def __init__(
        self,
        port: int | None = None,
        *,
        log_dir: Path | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        self.port = port or free_port()
        self.startup_timeout = startup_timeout
        self.startup_seconds: float | None = None
        argv = [sys.executable, "-m", "fanfuse.devstack", "moto", "--port", str(self.port)]
        log_path = (log_dir or default_log_dir()) / "moto.log"
        self.process = ManagedProcess("moto", argv, log_path=log_path)

    @property
    def url(self) -> str:
        """What FANFUSE_AWS_ENDPOINT_URL (and any boto3 client's endpoint_url) is set to."""
        return f"http://{LOOPBACK}:{self.port}"

    def _ready(self) -> bool:
        return http_request("GET", self.url + "/moto-api/", timeout=1.0)[0] == 200

    def launch(self) -> None:
        if importlib.util.find_spec("moto") is None:
            raise RuntimeError("moto not installed: pip install 'moto[server,dynamodb,sqs]'")
        self._started_at = time.monotonic()
        self.process.start()

    def wait_ready(self) -> None:
        wait_until(self._ready, self.startup_timeout, "moto server", process=self.process)
        self.startup_seconds = time.monotonic() - self._started_at

    def reset(self) -> None:
        """Forget every resource (tables, queues): moto's own reset endpoint."""
        status, body = http_request("POST", self.url + "/moto-api/reset")
        if status != 200:
            raise RuntimeError(f"moto reset failed: {status} {body[:300]!r}")
