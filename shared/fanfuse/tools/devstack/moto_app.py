"""moto's server with DynamoDB's atomicity: the local AWS endpoint (DynamoDB, SQS) of the tests
(`ThreadedMoto`, in a thread) and of a stack's own process
(`python -m fanfuse.tools.devstack.moto_app --port N`, always on 127.0.0.1).

moto's server answers each request in a thread of its own, and its DynamoDB backend checks a
condition and then writes, unlocked: two conditional writes to one item at the same moment can
both pass, which DynamoDB never allows (a single item's writes, and a transaction's, are atomic).
`SerialDynamoDB` makes DynamoDB requests go one at a time, which is that guarantee and no more:
clients still interleave between their reads and their conditional writes, as they do on AWS.
Other services stay concurrent (an SQS long poll must not hold DynamoDB up).

moto is a development dependency (the dev extra): imported only when a server starts.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import httpx

from fanfuse.tools.devstack.processes import LOOPBACK

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


def _quiet(handler: type[Any]) -> type[Any]:
    """moto's request handler without its line per request (thousands in a contention test)."""

    class Quiet(handler):  # type: ignore[misc, valid-type]
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return Quiet


def sqs_attributes_as_aws() -> None:
    """Two of moto's (5.2) SQS answers made SQS's, for Terraform's AWS provider, which waits
    until a queue reads back what it set and plans again on any difference:

    - a RedriveAllowPolicy is stored but never returned (the provider then waits forever for
      `aws_sqs_queue_redrive_allow_policy`, on create and on destroy): it is now returned, and
      absent once set to "";
    - a RedrivePolicy comes back as `json.dumps` spaces it, where SQS answers compact JSON (a
      plan after the apply would change every queue, "whitespace changes"): now compact.

    Idempotent; a moto that already answers both is left alone."""
    from moto.sqs.models import Queue

    if "RedriveAllowPolicy" in Queue.BASE_ATTRIBUTES:
        return
    read = Queue.__dict__["attributes"].fget  # the property's getter
    assert read is not None

    def attributes(queue: Queue) -> dict[str, Any]:
        found: dict[str, Any] = read(queue)
        if not found.get("RedriveAllowPolicy"):
            found.pop("RedriveAllowPolicy", None)
        if queue.redrive_policy:
            found["RedrivePolicy"] = json.dumps(queue.redrive_policy, separators=(",", ":"))
        return found

    Queue.BASE_ATTRIBUTES = [*Queue.BASE_ATTRIBUTES, "RedriveAllowPolicy"]
    Queue.redrive_allow_policy = None  # type: ignore[attr-defined]
    Queue.attributes = property(attributes)  # type: ignore[method-assign, assignment]


def make_moto_server(port: int) -> BaseWSGIServer:
    """moto (every backend) behind SerialDynamoDB, threaded, bound to LOOPBACK:`port` (0: any
    free one); not serving yet."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    sqs_attributes_as_aws()
    app = SerialDynamoDB(DomainDispatcherApplication(create_backend_app))
    return make_server(
        LOOPBACK, port, app, threaded=True, request_handler=_quiet(MotoRequestHandler)
    )


class ThreadedMoto:
    """`make_moto_server` in a daemon thread of this process (the tests' session fixture)."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        if self._server is None:
            raise RuntimeError("the moto server is not started")
        return f"http://{LOOPBACK}:{self._server.server_port}"

    def start(self) -> ThreadedMoto:
        self._server = make_moto_server(self.port)
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


def main(argv: list[str] | None = None) -> None:
    """Serve until killed: what a stack runs instead of `python -m moto.server`."""
    parser = argparse.ArgumentParser(prog="python -m fanfuse.tools.devstack.moto_app")
    parser.add_argument("--port", type=int, required=True)
    server = make_moto_server(parser.parse_args(argv).port)
    print(f"moto on http://{LOOPBACK}:{server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
