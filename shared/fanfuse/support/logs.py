"""Structured logs in Cloud Logging's format: one JSON object a line, correlated by request.

Cloud Run and Cloud Functions turn each JSON line a process writes into a log entry, reading a
few special fields (https://cloud.google.com/logging/docs/structured-logging): `severity`,
`message`, `time`, `logging.googleapis.com/trace` (which groups an entry under its request's
trace) and `logging.googleapis.com/spanId`. Here every line also says which search and which
platform it was logged for (`task_id`, `platform`), so one search's lines across the five
functions and every retry can be found with one filter.

Where those come from: context variables, set by the functions' wrappers (fronts/functions.py: the
trace of the incoming request; a task delivery's task id and platform), by `fanfuse serve`'s app
(the request's trace), and by the service's `run_platform` and `aggregate` (`in_task_context`:
so the embedded runtime's lines carry them too). A contextvar follows the code
into the coroutines it runs, and no function signature has to pass it along.

The formatter formats `record.getMessage()`, which the redaction record factory (redact.py) has
already masked; a traceback, formatted here, is masked here.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Protocol, TextIO, TypeVar

from pydantic import BaseModel

from fanfuse.support.redact import redact

TRACE_FIELD = "logging.googleapis.com/trace"
SPAN_FIELD = "logging.googleapis.com/spanId"
SAMPLED_FIELD = "logging.googleapis.com/trace_sampled"
TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
"""W3C Trace Context: version-trace_id-parent_id-flags, lower-case hex."""
CLOUD_TRACE = re.compile(r"^([0-9a-fA-F]{32})(?:/([0-9]{1,20}))?(?:;o=[0-9])?$")
"""`X-Cloud-Trace-Context: TRACE_ID/SPAN_ID;o=OPTIONS`, the span id in decimal: an unsigned 64-bit
number, so at most 20 digits (`[0-9]`, not `\\d`, which matches every script's digits). A longer
one is no trace: `int()` of thousands of digits is slow, and past Python's `int_max_str_digits`
(4,300) a ValueError, which once answered 500 on every route of every front."""


class Trace(BaseModel):
    trace_id: str
    span_id: str | None = None
    sampled: bool | None = None
    """Whether the span is recorded (`logging.googleapis.com/trace_sampled`); None: unknown."""


TraceSource = Callable[[], Trace | None]
_span_source: TraceSource | None = None
"""Where the current span's ids come from once tracing is on (`fanfuse.tracing.setup`): a line
logged inside a span names that span, not only the request's incoming trace."""


def use_span_ids(source: TraceSource | None) -> None:
    """Lines name the span `source` returns (None: the request's incoming trace only)."""
    global _span_source
    _span_source = source


def current_trace() -> Trace | None:
    """The trace a line logged now belongs to: the current span's, else the request's."""
    found = _span_source() if _span_source is not None else None
    return found if found is not None else _trace.get()


_trace: ContextVar[Trace | None] = ContextVar("fanfuse_trace", default=None)
_task_id: ContextVar[str | None] = ContextVar("fanfuse_task_id", default=None)
_platform: ContextVar[str | None] = ContextVar("fanfuse_platform", default=None)


def parse_trace(headers: Mapping[str, str]) -> Trace | None:
    """The request's trace: `traceparent` first (the W3C standard, which Google's front ends
    also send), else `X-Cloud-Trace-Context`; None when neither is there or well formed. An
    all-zero trace id is invalid in both formats, so it is no trace either."""
    headers = {name.lower(): value for name, value in headers.items()}  # names: any case
    parent = TRACEPARENT.match(headers.get("traceparent", "").strip())
    if parent is not None and parent.group(1) != "0" * 32:
        return Trace(trace_id=parent.group(1), span_id=parent.group(2))
    cloud = CLOUD_TRACE.match(headers.get("x-cloud-trace-context", "").strip())
    if cloud is not None and cloud.group(1).strip("0"):
        span = cloud.group(2)
        # Cloud Logging's spanId is 16 hex digits; the header gives the span in decimal.
        span_hex = f"{int(span):016x}" if span is not None and int(span) < 2**64 else None
        return Trace(trace_id=cloud.group(1).lower(), span_id=span_hex)
    return None


@contextmanager
def request_context(headers: Mapping[str, str]) -> Iterator[None]:
    """Lines logged inside carry the trace of the request with these headers (if any)."""
    token = _trace.set(parse_trace(headers))
    try:
        yield
    finally:
        _trace.reset(token)


def current_task() -> tuple[str | None, str | None]:
    """The task id and platform of the current `task_context` (the tracing spans' too)."""
    return _task_id.get(), _platform.get()


@contextmanager
def task_context(task_id: str, platform: str | None = None) -> Iterator[None]:
    """Lines logged inside carry this task id (and platform, for a platform's run)."""
    tokens = (_task_id.set(task_id), _platform.set(platform))
    try:
        yield
    finally:
        _platform.reset(tokens[1])
        _task_id.reset(tokens[0])


class TaskMessage(Protocol):
    """A task delivery's body: its task id, and a `platform` when it is one platform's run."""

    @property
    def task_id(self) -> str: ...


Owner = TypeVar("Owner")
Msg = TypeVar("Msg", bound=TaskMessage)
Result = TypeVar("Result")


def in_task_context(
    handle: Callable[[Owner, Msg], Awaitable[Result]],
) -> Callable[[Owner, Msg], Coroutine[Any, Any, Result]]:  # as `async def`
    """A method handling one task delivery, run in that task's `task_context`: the service's
    run_platform and aggregate, so every runtime's lines name the task, from one wrapper."""

    @functools.wraps(handle)
    async def handle_in_context(owner: Owner, message: Msg) -> Result:
        platform: str | None = getattr(message, "platform", None)
        with task_context(message.task_id, platform):
            return await handle(owner, message)

    return handle_in_context


EVENT_FIELD = "fanfuse_event"
"""The LogRecord attribute (`extra=`) of an event's fields (service/events.py): the formatter
writes them into the line's JSON, where log-based metrics read them (`jsonPayload.<field>`)."""


class CloudLoggingFormatter(logging.Formatter):
    """One JSON object a record, with Cloud Logging's special fields and the context's (and an
    event's fields, `EVENT_FIELD`)."""

    def __init__(self, project: str) -> None:
        super().__init__()
        self.project = project

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message = f"{message}\n{redact(self.formatException(record.exc_info))}"
        entry: dict[str, object] = {
            "severity": severity(record.levelno),
            "message": message,
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "logger": record.name,
        }
        trace = current_trace()
        if trace is not None:
            entry[TRACE_FIELD] = f"projects/{self.project}/traces/{trace.trace_id}"
            if trace.span_id is not None:
                entry[SPAN_FIELD] = trace.span_id
            if trace.sampled is not None:
                entry[SAMPLED_FIELD] = trace.sampled
        task_id, platform = _task_id.get(), _platform.get()
        if task_id is not None:
            entry["task_id"] = task_id
        if platform is not None:
            entry["platform"] = platform
        fields = getattr(record, EVENT_FIELD, None)
        if isinstance(fields, dict):
            entry.update({k: v for k, v in fields.items() if k not in entry})
        return json.dumps(entry, ensure_ascii=False)


def severity(level: int) -> str:
    """Python's level -> Cloud Logging's LogSeverity (the next one down for a custom level)."""
    for floor, name in (
        (logging.CRITICAL, "CRITICAL"),
        (logging.ERROR, "ERROR"),
        (logging.WARNING, "WARNING"),
        (logging.INFO, "INFO"),
        (logging.DEBUG, "DEBUG"),
    ):
        if level >= floor:
            return name
    return "DEFAULT"


def install_json_logging(
    project: str, stream: TextIO | None = None, level: int = logging.INFO
) -> None:
    """The root logger writes Cloud Logging JSON lines to `stream` (stderr), replacing its
    handlers, at `level` or a lower level already set (a process that asked for DEBUG before
    keeps it). Idempotent: the formatter's handler is installed once."""
    root = logging.getLogger()
    for handler in root.handlers:
        if isinstance(handler.formatter, CloudLoggingFormatter):
            return
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(CloudLoggingFormatter(project))
    root.handlers = [handler]
    root.setLevel(min(root.level, level) if root.level != logging.NOTSET else level)
