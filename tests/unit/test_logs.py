"""Cloud Logging JSON lines (logs.py): the trace headers, the formatter, and a function
target's lines carrying the task, the platform and the request's trace."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import flask
import pytest

from fanfuse import cloud, logs
from fanfuse.logs import SPAN_FIELD, TRACE_FIELD, CloudLoggingFormatter, Trace, parse_trace
from fanfuse.queue.base import PlatformMessage
from fanfuse.redact import install_log_redaction
from tests.unit.test_cloud_wrappers import FROM_TASKS, MESSAGE, _Service, app, call

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
        logging.getLogger("fanfuse.service").warning("running %s", message.platform)
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
    answer = call(app, cloud.run_platform, _Logging(RuntimeError("unused")), MESSAGE, headers)
    assert answer.status_code == 503
    entries: list[dict[str, Any]] = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert [e["message"].split("\n")[0] for e in entries] == ["running docs", "run_platform failed"]
    for entry in entries:
        assert entry["task_id"] == "t1" and entry["platform"] == "docs"
        assert entry[TRACE_FIELD] == f"projects/demo-fanfuse/traces/{TRACE_ID}"
    assert entries[1]["severity"] == "ERROR" and "RuntimeError: boom" in entries[1]["message"]


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
