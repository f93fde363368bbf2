"""What a queued task carries besides its body: its trace, and when it was enqueued.

A search's trace crosses its queue hops (start -> run_platform, run_platform -> aggregate, the
deadline task) because each queue carries a small carrier beside the body, made by `outbound`
when the task is enqueued: Cloud Tasks as HTTP headers of the task, SQS as message attributes
(the Lambda front reads them back as headers), the in-process queue beside its message. It holds
the W3C `traceparent` (and `tracestate`, or what else the configured propagators write) while
tracing is on, and always the moment of the enqueue (`X-Fanfuse-Enqueued-At`), which the search's
timeline reads (rules/timeline.py: a platform's `queued`) with or without tracing.

Where a delivery is handled (`http.deliveries` for the cloud targets, the in-process queue),
`inbound` continues that trace: its context becomes the current one, and the time the task
waited in its queue becomes a `queued` span (from the enqueue to now) under the span that
enqueued it; the service's `run_platform` or `aggregate` span is its sibling. `delivered` tells
the service what came with the delivery it is handling.

The carrier is not signed (the body is, `auth.task_deliveries`): whoever could replay a signed body
could only put a delivery into another trace, and a delivery with no carrier (a direct call) falls
back to the trace its task document keeps (`Task.trace`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from fanfuse.tracing import spans

ENQUEUED_AT = "x-fanfuse-enqueued-at"
"""The carrier's enqueue time (ISO 8601, UTC). Lower case: an SQS attribute name as it is."""
MAX_VALUE_CHARS = 512
"""A carrier value longer than this is not read (headers are the sender's to fill)."""


@dataclass(frozen=True)
class Delivered:
    """What came with the delivery being handled."""

    enqueued_at: datetime | None = None
    traced: bool = False
    """A trace context came with it (else the service continues its task document's)."""


_delivered: ContextVar[Delivered | None] = ContextVar("fanfuse_delivered", default=None)


def outbound(
    target: str, platform: str | None = None, now: datetime | None = None
) -> dict[str, str]:
    """The carrier of a task for `target` enqueued now: its enqueue time, and, when tracing is
    on, the context of an `enqueue <target>` span (kind producer, the messaging conventions'
    "create" span) that its delivery's spans continue."""
    carrier = {ENQUEUED_AT: (now or datetime.now(UTC)).isoformat()}
    attributes = {"messaging.operation.type": "create", "messaging.destination.name": target}
    with spans.span(f"enqueue {target}", {**attributes, spans.PLATFORM: platform}, kind="producer"):
        spans.inject(carrier)
    return carrier


def enqueued_at(carrier: Mapping[str, str]) -> datetime | None:
    """The enqueue time a carrier names (None: none, or not a time)."""
    folded = {k.lower(): v for k, v in carrier.items()}
    value = folded.get(ENQUEUED_AT)
    if value is None or len(value) > MAX_VALUE_CHARS:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


@contextlib.contextmanager
def inbound(carrier: Mapping[str, str] | None, target: str) -> Iterator[Delivered]:
    """Handle a delivery of `target` inside: its trace continued, its wait a `queued` span."""
    carrier = {k: v for k, v in (carrier or {}).items() if len(v) <= MAX_VALUE_CHARS}
    enqueued = enqueued_at(carrier)
    context = spans.extract(carrier)
    traced = spans.has_span(context)
    seen = Delivered(enqueued_at=enqueued, traced=traced)
    token = _delivered.set(seen)
    try:
        if not traced:
            yield seen
            return
        from opentelemetry import context as otel_context

        attached = otel_context.attach(context) if context is not None else None
        try:
            if enqueued is not None:
                with spans.span(
                    f"queued {target}", {"messaging.destination.name": target}, start=enqueued
                ):
                    pass
            yield seen
        finally:
            if attached is not None:
                otel_context.detach(attached)
    finally:
        _delivered.reset(token)


def delivered() -> Delivered:
    """What came with the delivery being handled (nothing, outside one)."""
    return _delivered.get() or Delivered()


class Message(Protocol):
    @property
    def task_id(self) -> str: ...


class Kept(Protocol):
    """A task document, as far as its kept trace goes (`Task.trace`)."""

    @property
    def trace(self) -> str | None: ...


class Documents(Protocol):
    def get_task(self, task_id: str) -> Kept | None: ...


class Handler(Protocol):
    """What handles deliveries: the service, with the store it reads the task document from."""

    @property
    def store(self) -> Documents: ...


Owner = TypeVar("Owner", bound=Handler)
Msg = TypeVar("Msg", bound=Message)


def handled(
    target: str,
) -> Callable[
    [Callable[[Owner, Msg], Awaitable[str]]], Callable[[Owner, Msg], Coroutine[Any, Any, str]]
]:
    """A service method handling one delivery of `target`, in a span of its own (kind
    consumer) that ends with the method's outcome (`fanfuse.outcome`). Its parent: the span
    that enqueued the task when its trace came with the delivery (`inbound`), else the one its
    task document keeps (`Task.trace`: a direct call, a redelivery that lost its carrier), read
    only while tracing is on."""

    def wrap(
        handle: Callable[[Owner, Msg], Awaitable[str]],
    ) -> Callable[[Owner, Msg], Coroutine[Any, Any, str]]:
        @functools.wraps(handle)
        async def traced(owner: Owner, message: Msg) -> str:
            parent = None
            if spans.enabled() and not delivered().traced:
                task = owner.store.get_task(message.task_id)
                parent = spans.from_traceparent(task.trace if task is not None else None)
            with spans.span(target, kind="consumer", parent=parent) as span:
                outcome = await handle(owner, message)
                if span is not None:
                    span.set_attribute("fanfuse.outcome", outcome)
                return outcome

        return traced

    return wrap
