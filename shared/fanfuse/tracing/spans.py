"""The spans the code opens: a no-op until tracing is configured (`setup.configure`).

Call sites write `with spans.span("claim"):` and never ask whether tracing is on: while it is
off (no `OTEL_*` variable set, or the `tracing` extra not installed) `span` hands back one shared
`nullcontext` and nothing of OpenTelemetry is even imported, so the cost is a function call and
a global read. Once on, a span is OpenTelemetry's own (`start_as_current_span`): it becomes the
current span for the block, records an exception that leaves it and marks itself failed.

What every span of a search carries is set in one place, not at each call site: `TaskAttributes`
(a span processor, installed by `setup`) copies the search's task id and platform from the log
context (`support.logs.task_context`, which the service enters for every delivery and start)
onto each span as it starts, the gRPC and botocore client spans of the store included. The span
a front opened for the request (`server`) gets them too, from `bind_task`, once the start has
made the task id.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from fanfuse.support import logs

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, Span
    from opentelemetry.trace import Span as ApiSpan
    from opentelemetry.trace import Tracer

TASK_ID = "fanfuse.task_id"
PLATFORM = "fanfuse.platform"
Kind = Literal["internal", "server", "client", "producer", "consumer"]
Value = str | bool | int | float | Sequence[str]
Attributes = Mapping[str, Value | None]

_tracer: Tracer | None = None
_OFF: AbstractContextManager[None] = contextlib.nullcontext()
_request_span: ContextVar[ApiSpan | None] = ContextVar("fanfuse_request_span", default=None)


def enabled() -> bool:
    return _tracer is not None


def use(tracer: Tracer | None) -> None:
    """The tracer spans come from (`setup.configure`); None: tracing off again (tests)."""
    global _tracer
    _tracer = tracer


def span(
    name: str,
    attributes: Attributes | None = None,
    *,
    kind: Kind = "internal",
    start: datetime | None = None,
    parent: Context | None = None,
) -> AbstractContextManager[ApiSpan | None]:
    """A span around the block, current inside it (None inside when tracing is off).

    `start`: when it began, if before now (a task's wait in its queue); `parent`: a context
    other than the current one (a delivery's, a task document's)."""
    if _tracer is None:
        return _OFF
    from opentelemetry.trace import SpanKind

    return _tracer.start_as_current_span(
        name,
        context=parent,
        kind=SpanKind[kind.upper()],
        attributes=_clean(attributes),
        start_time=_ns(start),
    )


@contextlib.contextmanager
def server(
    name: str, headers: Mapping[str, str], attributes: Attributes | None = None
) -> Iterator[None]:
    """The span of one request a front serves (kind server), continuing the caller's trace when
    its `traceparent` (or whatever the configured propagators read) is there."""
    if _tracer is None:
        yield
        return
    parent = extract(headers)
    with span(name, attributes, kind="server", parent=parent) as opened:
        token = _request_span.set(opened)
        try:
            yield
        finally:
            _request_span.reset(token)


def untraced() -> AbstractContextManager[object]:
    """No span inside, not even a client instrumentation's (what a local stand-in for a cloud
    service does on the service's behalf)."""
    if _tracer is None:
        return _OFF
    try:
        from opentelemetry.instrumentation.utils import suppress_instrumentation
    except ImportError:  # no instrumentation installed: nothing to suppress
        return _OFF
    return suppress_instrumentation()


def annotate(attributes: Attributes) -> None:
    """Set attributes on the current span (what is known only once its work is done)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attributes(_clean(attributes))


def event(name: str, attributes: Attributes | None = None) -> None:
    """An event on the current span: a retry, an aborted transaction attempt."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().add_event(name, _clean(attributes))


def bind_task(task_id: str) -> None:
    """The search a start just made: its id on the current span and on the request's span."""
    if _tracer is None:
        return
    from opentelemetry import trace

    for opened in (trace.get_current_span(), _request_span.get()):
        if opened is not None:
            opened.set_attribute(TASK_ID, task_id)


def inject(carrier: dict[str, str], context: Context | None = None) -> None:
    """Write the current (or `context`'s) trace into `carrier` with the configured propagators
    (W3C `traceparent` by default)."""
    if _tracer is None:
        return
    from opentelemetry import propagate

    propagate.inject(carrier, context=context)


def extract(carrier: Mapping[str, str]) -> Context | None:
    """The trace context a carrier (headers, message attributes) holds; None when off. Names
    are read in any case (HTTP frameworks title-case them)."""
    if _tracer is None:
        return None
    from opentelemetry import propagate

    return propagate.extract({k.lower(): v for k, v in carrier.items()})


def traceparent() -> str | None:
    """The current span as a W3C `traceparent` (what the task document keeps); None when off
    or outside any span."""
    carrier: dict[str, str] = {}
    if _tracer is not None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")


def from_traceparent(value: str | None) -> Context | None:
    """The context a kept `traceparent` names (None: none kept, or tracing off)."""
    if _tracer is None or not value:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": value})


def has_span(context: Context | None) -> bool:
    """Whether `context` holds a valid span to continue (an extracted carrier may hold none)."""
    if _tracer is None or context is None:
        return False
    from opentelemetry import trace

    return trace.get_current_span(context).get_span_context().is_valid


def log_ids() -> logs.Trace | None:
    """The current span's ids, for a log line (support/logs.py's trace source)."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    found = trace.get_current_span().get_span_context()
    if not found.is_valid:
        return None
    return logs.Trace(
        trace_id=f"{found.trace_id:032x}",
        span_id=f"{found.span_id:016x}",
        sampled=found.trace_flags.sampled,
    )


C = TypeVar("C", bound=type)
F = TypeVar("F", bound=Callable[..., Any])


def traced(name: str) -> Callable[[F], F]:
    """A function whose every call is a span `name` (a step of the start: validate, budget)."""

    def wrap(function: F) -> F:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            if _tracer is None:
                return function(*args, **kwargs)
            with span(name):
                return function(*args, **kwargs)

        return cast(F, call)

    return wrap


def traced_methods(system: str, port: type) -> Callable[[C], C]:
    """A class decorator for a store: each call of a method its `port` declares is a span
    `store <method>` (a transaction with its attempts, a progress write), the round trips the
    client spans inside it."""
    declared = {n for n in dir(port) if not n.startswith("_")} - {"close"}

    def decorate(cls: C) -> C:
        for name, method in list(vars(cls).items()):
            if name in declared and inspect.isfunction(method):
                setattr(cls, name, _traced(method, system))
        return cls

    return decorate


def _traced(method: Callable[..., Any], system: str) -> Callable[..., Any]:
    operation = method.__name__
    attributes = {"db.system.name": system, "db.operation.name": operation}

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _tracer is None:
            return method(self, *args, **kwargs)
        name = f"store {operation}"
        if operation == "transact" and len(args) == 3:  # named by its rule: claim, finish...
            name = f"transact {rule_name(args[2])}"
        with span(name, attributes, kind="client"):
            return method(self, *args, **kwargs)

    return call


def rule_name(mutate: Any) -> str:
    """The rule a store's mutator comes from (`lifecycle.claim(...)` makes a closure whose
    qualified name is `claim.<locals>.mutate`): what its transaction is named after."""
    qualified = str(getattr(mutate, "__qualname__", type(mutate).__name__))
    return qualified.split(".<locals>", 1)[0].rsplit(".", 1)[-1]


class TaskAttributes:
    """A span processor: each span started inside a search's log context gets its task id and
    platform (see the module). The other hooks do nothing: this processor exports nothing."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        task_id, platform = logs.current_task()
        if task_id is not None:
            span.set_attribute(TASK_ID, task_id)
        if platform is not None:
            span.set_attribute(PLATFORM, platform)

    def _on_ending(self, span: Span) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        return None

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _clean(attributes: Attributes | None) -> dict[str, Any]:
    """OpenTelemetry takes no None value: those attributes are left out."""
    return {k: v for k, v in (attributes or {}).items() if v is not None}


def _ns(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1e9)
