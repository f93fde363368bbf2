"""Cloud Logging JSON lines (logs.py): the trace headers, the formatter, and a function
target's lines carrying the task, the platform and the request's trace."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import flask
import httpx
import pytest

from fanfuse.auth.keys import API_KEY_HEADER
from fanfuse.fronts import functions
from fanfuse.fronts.serve.app import create_app
from fanfuse.platforms import Registry
from fanfuse.queue.port import PlatformMessage
from fanfuse.rules import lifecycle
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.support import logs
from fanfuse.support.logs import SPAN_FIELD, TRACE_FIELD, CloudLoggingFormatter, Trace, parse_trace
from fanfuse.support.redact import install_log_redaction
from tests.support.fakes import FakePlatform
from tests.unit.runtimes.test_cloud_wrappers import FROM_TASKS, MESSAGE, _Service, app, call

__all__ = ["app"]  # the fixture, used by name

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"traceparent": TRACEPARENT}, Trace(trace_id=TRACE_ID, span_id="00f067aa0ba902b7")),
        ({"Traceparent": TRACEPARENT}, Trace(trace_id=TRACE_ID, span_id="00f067aa0ba902b7")),
        (
            {"X-Cloud-Trace-Context": f"{TRACE_ID}/1;o=1"},
            Trace(trace_id=TRACE_ID, span_id="0" * 15 + "1"),
        ),
        ({"x-cloud-trace-context": TRACE_ID.upper()}, Trace(trace_id=TRACE_ID)),
        # traceparent wins over the older header when both are sent
        (
            {"traceparent": TRACEPARENT, "X-Cloud-Trace-Context": "a" * 32 + "/7"},
            Trace(trace_id=TRACE_ID, span_id="00f067aa0ba902b7"),
        ),
        # a malformed traceparent falls back to the other header
        ({"traceparent": "00-xyz-01", "X-Cloud-Trace-Context": "a" * 32}, Trace(trace_id="a" * 32)),
        ({"traceparent": f"00-{'0' * 32}-00f067aa0ba902b7-01"}, None),
        ({"X-Cloud-Trace-Context": "0" * 32 + "/1"}, None),
        ({"traceparent": "garbage"}, None),
        ({}, None),
    ],
)
def test_parse_trace(headers: dict[str, str], expected: Trace | None) -> None:
    assert parse_trace(headers) == expected


def _record(msg: str, *args: object, level: int = logging.INFO) -> logging.LogRecord:
    return logging.getLogRecordFactory()("fanfuse.x", level, __file__, 1, msg, args, None)


def test_a_line_is_one_json_object_with_cloud_loggings_fields() -> None:
    formatter = CloudLoggingFormatter("proj")
    plain = json.loads(formatter.format(_record("hello %s", "world", level=logging.WARNING)))
    assert plain["severity"] == "WARNING" and plain["message"] == "hello world"
    assert plain["time"].endswith("+00:00") and plain["logger"] == "fanfuse.x"
    assert TRACE_FIELD not in plain and "task_id" not in plain and "platform" not in plain
    with logs.request_context({"traceparent": TRACEPARENT}), logs.task_context("t9", "docs"):
        line = formatter.format(_record("multi\nline"))
    assert "\n" not in line
    entry = json.loads(line)
    assert entry[TRACE_FIELD] == f"projects/proj/traces/{TRACE_ID}"
    assert entry[SPAN_FIELD] == "00f067aa0ba902b7"
    assert (entry["task_id"], entry["platform"], entry["message"]) == ("t9", "docs", "multi\nline")


@pytest.mark.parametrize(
    ("level", "severity"),
    [(5, "DEFAULT"), (logging.DEBUG, "DEBUG"), (25, "INFO"), (logging.CRITICAL, "CRITICAL")],
)
def test_severity(level: int, severity: str) -> None:
    assert logs.severity(level) == severity


def test_the_formatted_message_is_the_redacted_one() -> None:
    install_log_redaction()
    token = "Bearer abcdefghijklmnopqrstuvwxyz0123"
    try:
        raise ValueError(f"provider said {token}")
    except ValueError as exc:
        record = _record("calling with %s", token, level=logging.ERROR)
        record.exc_info = (type(exc), exc, exc.__traceback__)
    line = CloudLoggingFormatter("proj").format(record)
    assert "abcdefghijklmnopqrstuvwxyz0123" not in line
    assert "calling with" in json.loads(line)["message"]


class _Logging(_Service):
    """Logs a line from inside the service's run, then fails unexpectedly (a 503 the wrapper
    logs as well)."""

    async def run_platform(self, message: PlatformMessage) -> str:
        logging.getLogger("fanfuse.service.service").warning("running %s", message.platform)
        raise RuntimeError("boom")


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(CloudLoggingFormatter("demo-fanfuse"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield stream
    finally:
        root.removeHandler(handler)


def test_a_task_targets_lines_carry_task_platform_and_trace(
    app: flask.Flask, lines: io.StringIO
) -> None:
    headers = {**FROM_TASKS, "traceparent": TRACEPARENT}
    answer = call(app, functions.run_platform, _Logging(RuntimeError("unused")), MESSAGE, headers)
    assert answer.status_code == 503
    entries = _entries(lines)
    assert [e["message"].split("\n")[0] for e in entries] == ["running docs", "run_platform failed"]
    for entry in entries:
        assert entry["task_id"] == "t1" and entry["platform"] == "docs"
        assert entry[TRACE_FIELD] == f"projects/demo-fanfuse/traces/{TRACE_ID}"
    assert entries[1]["severity"] == "ERROR" and "RuntimeError: boom" in entries[1]["message"]


def _entries(lines: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines.getvalue().splitlines()]


async def test_embedded_platform_and_aggregate_lines_name_their_task(
    settings: Settings, lines: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service sets the context itself, so the embedded runtime's lines carry it as the
    functions' do: a platform's run (its task and platform) and the aggregate (its task)."""
    finalize = lifecycle.finalize

    def logged_finalize(*args: Any, **kwargs: Any) -> Any:
        logging.getLogger("fanfuse.rules.aggregate").warning("finalizing")
        return finalize(*args, **kwargs)

    monkeypatch.setattr(lifecycle, "finalize", logged_finalize)
    failing = FakePlatform("b", error=RuntimeError("provider down"))
    async with EmbeddedRuntime(settings, registry=Registry.of([FakePlatform("a"), failing])) as rt:
        view = await rt.search({"query": "q"})
    by_message = {e["message"].split("\n")[0]: e for e in _entries(lines)}
    failed, final = by_message["platform b failed"], by_message["finalizing"]
    assert (failed["task_id"], failed["platform"]) == (view.task_id, "b")
    assert final["task_id"] == view.task_id and "platform" not in final


@pytest.mark.parametrize(
    ("header", "span"),
    [
        ({"traceparent": TRACEPARENT}, "00f067aa0ba902b7"),
        ({"X-Cloud-Trace-Context": f"{TRACE_ID}/1;o=1"}, "0" * 15 + "1"),
    ],
)
async def test_serves_lines_carry_the_requests_trace(
    settings: Settings,
    lines: io.StringIO,
    monkeypatch: pytest.MonkeyPatch,
    header: dict[str, str],
    span: str,
) -> None:
    issued: list[str] = []
    serve = create_app(settings, registry=Registry.of([FakePlatform("a")]), on_key=issued.append)

    def broken_start(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    async with serve.router.lifespan_context(serve):
        monkeypatch.setattr(serve.state.runtime.service, "start", broken_start)
        transport = httpx.ASGITransport(app=serve)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            headers = {API_KEY_HEADER: issued[0], **header}
            answer = await http.post("/start_search", json={"query": "q"}, headers=headers)
    assert answer.status_code == 503
    (entry,) = [e for e in _entries(lines) if e["message"].startswith("start_search failed")]
    assert entry[TRACE_FIELD] == f"projects/demo-fanfuse/traces/{TRACE_ID}"
    assert entry[SPAN_FIELD] == span


def test_installing_keeps_a_lower_level_and_installs_once() -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        root.setLevel(logging.DEBUG)
        stream = io.StringIO()
        logs.install_json_logging("proj", stream)
        logs.install_json_logging("proj", io.StringIO())
        assert root.level == logging.DEBUG and len(root.handlers) == 1
        logging.getLogger("fanfuse.y").debug("seen")
        assert json.loads(stream.getvalue())["message"] == "seen"
    finally:
        root.handlers = saved[0]
        root.setLevel(saved[1])
