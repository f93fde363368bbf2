"""Tracing on, from the standard OpenTelemetry variables, once per process.

Each composition root calls `configure()` (the function and Lambda entry points, the embedded
runtime, hence `fanfuse serve`, `fanfuse mcp` and `fanfuse search`). It does nothing unless
some `OTEL_*` variable is set, so a deployment that says nothing about tracing pays nothing for
it; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keep it off whatever else is set.
Everything else is OpenTelemetry's own knob, read by the SDK or here as the specification says:

| variable                                   | what                                            |
|--------------------------------------------|-------------------------------------------------|
| `OTEL_TRACES_EXPORTER`                     | `otlp` (default), `console`, `gcp_trace` (the   |
|                                            | `gcp-trace` extra), any installed exporter      |
|                                            | entry point; several, comma-separated           |
| `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`     | `http/protobuf` (default, the specification's)  |
|                                            | or `grpc`                                       |
| `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`,    | read by the OTLP exporters themselves           |
| `..._HEADERS`, `..._TIMEOUT`, `..._COMPRESSION` |                                            |
| `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` | the resource (default service name: fanfuse) |
| `OTEL_TRACES_SAMPLER[_ARG]`                | read by the SDK's TracerProvider                |
| `OTEL_PROPAGATORS`                         | `tracecontext,baggage` (default), `xray` (the   |
|                                            | `aws-trace` extra)...                           |
| `OTEL_PYTHON_ID_GENERATOR`                 | `random` (default) or `xray` (X-Ray trace ids)  |
| `OTEL_BSP_*`                               | the batch span processor's queue and schedule   |

Besides fanfuse's own spans, the store's and the queue's client calls become spans of their
own where the instrumentation is installed (the `tracing` extra brings both): gRPC
(Firestore, Cloud Tasks) and botocore (DynamoDB, SQS). Each is one round trip, so a trace
counts the round trips on a worker's path (`fanfuse bench latency --tracing` does).

Spans are batched and exported from a background thread; a function or a Lambda handler, whose
instance may be frozen as soon as it answers, calls `flush()` before it does.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Mapping
from importlib import metadata
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from fanfuse.support import logs
from fanfuse.tracing import spans

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "fanfuse"
FLUSH_TIMEOUT_MS = 2000
"""How long a function waits for its spans to leave before it answers (then it answers)."""
OTLP_PROTOCOLS = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}

_provider: TracerProvider | None = None
_global_is_ours = False
_missing_said = False
"""The global provider was set here (once per process: later configurations, in tests, keep
the client instrumentations on the first one)."""
_lock = threading.Lock()


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether these variables ask for tracing: any `OTEL_*` one, unless the SDK is disabled
    or the traces exporter is `none`."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(name.startswith("OTEL_") for name in environ)


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    """The exporter entry points `OTEL_TRACES_EXPORTER` names, `otlp` resolved by protocol."""
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    names = []
    for name in (environ.get("OTEL_TRACES_EXPORTER") or "otlp").split(","):
        name = name.strip().lower()
        if name == "otlp":
            if protocol not in OTLP_PROTOCOLS:
                raise ValueError(
                    f"OTEL_EXPORTER_OTLP_PROTOCOL {protocol!r}: use one of {sorted(OTLP_PROTOCOLS)}"
                )
            name = OTLP_PROTOCOLS[protocol]
        if name and name != "none":
            names.append(name)
    return names


def _entry_point(group: str, name: str) -> Any:
    found = [e for e in entry_points(group=group) if e.name == name]
    if not found:
        known = sorted(e.name for e in entry_points(group=group))
        raise ValueError(f"no {group} named {name!r} is installed (installed: {known})")
    return found[0].load()


def _exporters(environ: Mapping[str, str]) -> list[SpanExporter]:
    return [_entry_point("opentelemetry_traces_exporter", n)() for n in exporter_names(environ)]


def configure(environ: Mapping[str, str] | None = None) -> bool:
    """Turn tracing on if the environment asks for it (see the module); idempotent. Returns
    whether it is on. A setting that cannot be honoured (an exporter not installed, the
    `tracing` extra missing) is logged and leaves tracing off: telemetry never stops a search.
    `environ` (default: the process's, through the settings package, the one place that reads
    it) decides whether and which exporters; the exporters themselves read their own variables
    from the process's environment, as OpenTelemetry's do.

    A program that embeds fanfuse and has set up OpenTelemetry itself (a tracer provider of its
    own, set globally before this runs) gets fanfuse's spans in its traces, whatever the
    variables say: its provider is used as it is."""
    global _provider
    if environ is None:
        from fanfuse.settings.sources import variables

        environ = variables()
    with _lock:
        if spans.enabled():
            return True
        hosted = _hosted_provider()
        if hosted is not None:
            _use(hosted)
            return True
        if not wanted(environ):
            return False
        try:
            _provider = _build(environ)
        except ImportError as exc:
            global _missing_said
            if not _missing_said:  # once a process, not once a runtime
                _missing_said = True
                log.warning(
                    "OTEL_* is set but tracing is not installed (%s): "
                    "pip install 'fanfuse[tracing]'",
                    exc,
                )
            return False
        except Exception:
            log.exception("tracing could not be configured; it stays off")
            return False
        from opentelemetry import trace

        global _global_is_ours
        if not _global_is_ours:  # the API takes one global provider per process
            trace.set_tracer_provider(_provider)
            _global_is_ours = True
        _instrument_clients(_provider)
        _use(_provider)
        return True


def _hosted_provider() -> Any:
    """The program's own global tracer provider, if it set one (never one this module set)."""
    if _global_is_ours or "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace

    found = trace.get_tracer_provider()
    return (
        None if isinstance(found, trace.ProxyTracerProvider | trace.NoOpTracerProvider) else found
    )


def _use(provider: Any) -> None:
    try:
        version: str | None = metadata.version("fanfuse")
    except metadata.PackageNotFoundError:  # run from a source tree
        version = None
    spans.use(provider.get_tracer("fanfuse", version))
    logs.use_span_ids(spans.log_ids)


def _build(environ: Mapping[str, str]) -> TracerProvider:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporters = _exporters(environ)  # first: an unknown exporter fails before anything is set
    named = {} if environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: DEFAULT_SERVICE_NAME}
    if (
        "OTEL_RESOURCE_ATTRIBUTES" in environ
        and "service.name=" in environ["OTEL_RESOURCE_ATTRIBUTES"]
    ):
        named = {}
    generator = environ.get("OTEL_PYTHON_ID_GENERATOR", "").strip()
    provider = TracerProvider(
        resource=Resource.create(named),
        id_generator=_entry_point("opentelemetry_id_generator", generator)() if generator else None,
    )
    provider.add_span_processor(spans.TaskAttributes())  # type: ignore[arg-type]
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _instrumentors() -> list[Any]:
    """The client instrumentations installed here: gRPC (Firestore, Cloud Tasks), botocore
    (DynamoDB, SQS)."""
    found: list[Any] = []
    try:
        from opentelemetry.instrumentation.grpc import GrpcInstrumentorClient

        found.append(GrpcInstrumentorClient())  # type: ignore[no-untyped-call]
    except ImportError:
        log.debug("no gRPC instrumentation: Firestore and Cloud Tasks calls are not spans")
    try:
        from opentelemetry.instrumentation.botocore import BotocoreInstrumentor

        found.append(BotocoreInstrumentor())  # type: ignore[no-untyped-call]
    except ImportError:
        log.debug("no botocore instrumentation: DynamoDB and SQS calls are not spans")
    return found


def _instrument_clients(provider: TracerProvider) -> None:
    """The store's and the queue's client calls as spans of `provider` (the gRPC ones but
    OTLP's own export calls)."""
    for instrumentor in _instrumentors():
        options: dict[str, Any] = {"tracer_provider": provider}
        if type(instrumentor).__name__ == "GrpcInstrumentorClient":
            from opentelemetry.instrumentation.grpc import filters

            options["filter_"] = filters.negate(filters.service_prefix("opentelemetry.proto"))
        instrumentor.instrument(**options)


def flush(timeout_ms: int = FLUSH_TIMEOUT_MS) -> None:
    """Export what has ended (a function's instance may be frozen once it answers)."""
    provider = _provider
    if provider is not None:
        provider.force_flush(timeout_ms)


def shutdown() -> None:
    """Flush and stop exporting; tracing is off afterwards (a runtime that ends, tests)."""
    global _provider
    with _lock:
        provider, _provider = _provider, None
    spans.use(None)
    logs.use_span_ids(None)
    if provider is not None:
        for instrumentor in _instrumentors():
            instrumentor.uninstrument()
        provider.shutdown()
