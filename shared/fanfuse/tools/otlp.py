"""A local OTLP/HTTP trace receiver: what the tests and `fanfuse bench latency --tracing` export
to, so a trace is checked (and its cost measured) through the real exporters, on 127.0.0.1.

It answers `POST /v1/traces` as an OpenTelemetry Collector's OTLP/HTTP receiver does
(binary protobuf, gzip or not; 200 with an empty `ExportTraceServiceResponse`), decodes each
request with `opentelemetry-proto` and keeps the spans as `ReceivedSpan`s. `tree` draws one
trace as text, indented by parent, with each span's offset and duration; `orphans` and `roots`
say whether a trace hangs together.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

MAX_BODY_BYTES = 16 * 1024 * 1024
KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    service: str
    status: str
    events: tuple[str, ...] = ()

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


def _value(value: Any) -> Any:
    """An OTLP AnyValue as Python."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one `ExportTraceServiceRequest`."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    found = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        service = str(resource.get("service.name", ""))
        for scope in resource_spans.scope_spans:
            for s in scope.spans:
                found.append(
                    ReceivedSpan(
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_id=s.parent_span_id.hex() or None,
                        name=s.name,
                        kind=KINDS.get(s.kind, str(s.kind)),
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        attributes={a.key: _value(a.value) for a in s.attributes},
                        service=service,
                        status={0: "unset", 1: "ok", 2: "error"}.get(s.status.code, "?"),
                        events=tuple(e.name for e in s.events),
                    )
                )
    return found


@dataclass
class OtlpReceiver:
    """`with OtlpReceiver() as receiver:` spans exported to `receiver.endpoint` land in
    `receiver.spans`."""

    host: str = "127.0.0.1"
    port: int = 0
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    max_spans: int = 200_000
    """The newest spans kept (a session of tests exports many: bounded memory)."""
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        """`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL, path included)."""
        assert self._server is not None, "start it first"
        return f"http://{self.host}:{self._server.server_address[1]}/v1/traces"

    def env(self) -> dict[str, str]:
        """The variables that make a fanfuse process export its spans here."""
        return {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": self.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "200",
        }

    def start(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if self.path != "/v1/traces" or not 0 < length <= MAX_BODY_BYTES:
                    self.send_error(404 if self.path != "/v1/traces" else 400)
                    return
                body = self.rfile.read(length)
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                received = decode(body)
                with receiver._lock:
                    receiver.spans.extend(received)
                    del receiver.spans[: max(0, len(receiver.spans) - receiver.max_spans)]
                    receiver.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def clear(self) -> None:
        with self._lock:
            self.spans.clear()

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def of_task(self, task_id: str) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.attributes.get("fanfuse.task_id") == task_id]

    def wait_for(
        self,
        ready: Callable[[list[ReceivedSpan]], bool],
        timeout: float = 20.0,
        poll: float = 0.05,
    ) -> list[ReceivedSpan]:
        """The spans received, once `ready` says they are complete, or at `timeout` (bounded)."""
        end = time.monotonic() + timeout
        while True:
            with self._lock:
                now = list(self.spans)
            if ready(now) or time.monotonic() >= end:
                return now
            time.sleep(poll)


def roots(spans: Iterable[ReceivedSpan]) -> list[ReceivedSpan]:
    """The spans whose parent is not among them (one trace should have one)."""
    spans = list(spans)
    ids = {s.span_id for s in spans}
    return [s for s in spans if s.parent_id is None or s.parent_id not in ids]


def children(spans: Iterable[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return sorted((s for s in spans if s.parent_id == parent.span_id), key=lambda s: s.start_ns)


def descendants(spans: Iterable[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    spans = list(spans)
    found: list[ReceivedSpan] = []
    todo = [parent]
    while todo:
        for child in children(spans, todo.pop()):
            found.append(child)
            todo.append(child)
    return found


SHOWN_ATTRIBUTES = (
    "fanfuse.platform",
    "http.response.status_code",
    "rpc.method",
    "fanfuse.outcome",
    "fanfuse.attempts",
)


def tree(spans: Iterable[ReceivedSpan]) -> str:
    """One trace as text: a line per span, indented under its parent, with its start (after
    the root's) and its duration, and the attributes worth a glance."""
    spans = sorted(spans, key=lambda s: s.start_ns)
    if not spans:
        return "(no spans)"
    origin = min(s.start_ns for s in spans)
    lines: list[str] = []

    def draw(span: ReceivedSpan, depth: int) -> None:
        shown = [
            f"{k.split('.')[-1]}={span.attributes[k]}"
            for k in SHOWN_ATTRIBUTES
            if k in span.attributes
        ]
        lines.append(
            f"{(span.start_ns - origin) / 1e6:8.1f}ms {span.seconds * 1e3:8.1f}ms  "
            f"{'  ' * depth}{span.name} [{span.kind}, {span.service}]"
            + (f" {' '.join(shown)}" if shown else "")
            + (" ERROR" if span.status == "error" else "")
        )
        for child in children(spans, span):
            draw(child, depth + 1)

    for root in roots(spans):
        draw(root, 0)
    return "\n".join(lines)


STORE_SERVICES = ("google.firestore.v1.Firestore", "DynamoDB")
"""The store's services, as the gRPC and botocore client spans name them (`rpc.service`)."""


def store_round_trips(spans: Iterable[ReceivedSpan]) -> list[ReceivedSpan]:
    """The store's client calls among `spans`: one round trip each (SQLite has none: its
    operations, each a local call, stand in)."""
    return [
        s
        for s in spans
        if s.attributes.get("rpc.service") in STORE_SERVICES
        or s.attributes.get("db.system.name") == "sqlite"
    ]


def critical_path(spans: Iterable[ReceivedSpan], run: ReceivedSpan) -> list[ReceivedSpan]:
    """The store round trips of one `run_platform` span from its start (the delivery) until its
    fan-in committed (the end of its `transact finish`, or of the transaction that finishes and
    finalizes at once): what stands between a platform's answer and its count on the task."""
    under = descendants(spans, run)
    fan_in = [
        s
        for s in under
        if (s.name.startswith("transact ") and "fan_in" in s.name) or s.name == "transact finish"
    ]
    if not fan_in:
        return []
    until = max(s.end_ns for s in fan_in)
    return sorted(
        (s for s in store_round_trips(under) if s.start_ns <= until), key=lambda s: s.start_ns
    )
