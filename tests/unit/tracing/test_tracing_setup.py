"""Tracing's switch and knobs (tracing/setup.py), and what it costs while off (tracing/spans.py)."""

from __future__ import annotations

import io
import json
import logging

import pytest

from fanfuse.support import logs
from fanfuse.tracing import delivery, setup, spans


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"PATH": "/bin", "FANFUSE_PROJECT": "p"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_SERVICE_NAME": "fanfuse"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_SERVICE_NAME": "x"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, False),
    ],
)
def test_tracing_is_on_only_when_an_otel_variable_asks(environ: dict[str, str], on: bool) -> None:
    assert setup.wanted(environ) is on


def test_otlp_means_http_protobuf_unless_the_protocol_says_grpc() -> None:
    assert setup.exporter_names({}) == ["otlp_proto_http"]
    assert setup.exporter_names({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == ["otlp_proto_grpc"]
    traces = {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    }
    assert setup.exporter_names(traces) == ["otlp_proto_http"]
    both = {"OTEL_TRACES_EXPORTER": "otlp, console"}
    assert setup.exporter_names(both) == ["otlp_proto_http", "console"]
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        setup.exporter_names({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


def test_an_unknown_exporter_leaves_tracing_off(caplog: pytest.LogCaptureFixture) -> None:
    assert not setup.configure({"OTEL_TRACES_EXPORTER": "no_such_exporter"})
    assert not spans.enabled()
    assert "no_such_exporter" in caplog.text


def test_while_off_a_span_is_one_shared_no_op() -> None:
    assert not spans.enabled()
    first, second = spans.span("a"), spans.span("b", {"k": 1}, kind="client")
    assert first is second  # nothing made per call
    with first as opened:
        assert opened is None
    assert spans.traceparent() is None and spans.extract({"traceparent": "x"}) is None
    carrier = delivery.outbound("run_platform", "docs")
    assert set(carrier) == {delivery.ENQUEUED_AT}  # the timeline's enqueue time, no trace


def test_a_log_line_names_the_span_it_was_logged_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.CloudLoggingFormatter("proj"))
    logger = logging.getLogger("test_tracing_setup")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    assert setup.configure()
    try:
        with spans.span("work") as opened:
            assert opened is not None
            logger.info("inside")
            context = opened.get_span_context()
    finally:
        setup.shutdown()
        logger.removeHandler(handler)
    line = json.loads(stream.getvalue().splitlines()[-1])
    assert line[logs.TRACE_FIELD] == f"projects/proj/traces/{context.trace_id:032x}"
    assert line[logs.SPAN_FIELD] == f"{context.span_id:016x}"
    assert line[logs.SAMPLED_FIELD] is True


def test_an_enqueue_time_is_read_back_in_any_case_and_garbage_is_none() -> None:
    carrier = delivery.outbound("aggregate")
    when = delivery.enqueued_at({k.upper(): v for k, v in carrier.items()})
    assert when is not None and when.tzinfo is not None
    assert delivery.enqueued_at({delivery.ENQUEUED_AT: "yesterday"}) is None
    assert delivery.enqueued_at({delivery.ENQUEUED_AT: "2026-01-01T00:00:00" * 100}) is None
