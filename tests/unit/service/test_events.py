"""The service's event lines (service/events.py): their fields, as the JSON formatter writes them
(what infra/monitoring.tf's log-based metrics read), and the breaker's transitions, one line
each (service/circuit.py), on a real SQLite store."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import hcl2
import pytest

from fanfuse.rules.lifecycle import Outcome
from fanfuse.service import events
from fanfuse.service.circuit import Circuit
from fanfuse.store.sqlite import SqliteStore
from fanfuse.support.logs import CloudLoggingFormatter
from fanfuse.wire.models import (
    CacheNote,
    CacheState,
    CallRecord,
    FailureKind,
    PlatformRun,
    PlatformState,
)
from fanfuse.wire.options import CacheMode

INFRA = Path(__file__).resolve().parents[3] / "infra"
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    """The events logger's lines as Cloud Logging JSON, at INFO."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(CloudLoggingFormatter("p"))
    logger = logging.getLogger(events.LOGGER)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def entries(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_an_ended_run_is_one_json_line_with_its_figures(lines: io.StringIO) -> None:
    paid = CallRecord(platform="p", status=200, cost_usd=0.004)
    ok = PlatformRun(task_id="t", name="p", index=1, of=2, state=PlatformState.SUCCEEDED)
    ok = ok.model_copy(
        update={
            "timings": {"searching": 0.25},
            "calls": [paid, paid],
            "cache": CacheNote(state=CacheState.PARTIAL, mode=CacheMode.AUTO, hits=1, misses=2),
        }
    )
    failed = PlatformRun(task_id="t", name="q", index=2, of=2, state=PlatformState.FAILED)
    failed = failed.model_copy(update={"failure": FailureKind.CAPTCHA})
    running = PlatformRun(task_id="t", name="r", index=2, of=2, state=PlatformState.RUNNING)
    events.Events().runs_ended([ok, failed, running])  # a run not ended logs nothing
    first, second = entries(lines)
    assert first["logger"] == "fanfuse.events" and first["message"] == "p succeeded"
    assert {k: first[k] for k in ("event", "platform", "outcome", "latency_s")} == {
        "event": "platform_run",
        "platform": "p",
        "outcome": "succeeded",
        "latency_s": 0.25,
    }
    assert (first["calls"], first["cost_usd"], first["cache_hits"], first["cache_misses"]) == (
        2,
        0.008,
        1,
        2,
    )
    assert "kind" not in first
    assert second["kind"] == "captcha" and "latency_s" not in second


def test_a_breaker_transition_is_one_line_and_a_change_within_a_state_none(
    lines: io.StringIO, tmp_path: Path
) -> None:
    store = SqliteStore(tmp_path / "h.db")
    circuit = Circuit(store, lambda: NOW)
    failed = Outcome(state=PlatformState.FAILED, failure=FailureKind.ERROR)
    for _ in range(3):  # two failures count within `closed`, the third opens it
        circuit.record("p", failed)
    circuit.record("p", Outcome(state=PlatformState.FAILED, failure=FailureKind.QUERY))
    store.close()
    breaker_lines = [e for e in entries(lines) if e["event"] == "breaker"]
    assert [(e["platform"], e["state"], e["reason"]) for e in breaker_lines] == [
        ("p", "open", "error")
    ]


def test_the_log_based_metrics_read_fields_the_events_write() -> None:
    """Every `jsonPayload.<field>` infra/monitoring.tf reads is one an event line carries (a
    renamed field would leave a metric silently empty), and the file is valid HCL."""
    from datetime import timedelta

    from fanfuse.wire.models import SearchRequest, Task, utcnow

    run = PlatformRun(task_id="t", name="p", index=1, of=1, state=PlatformState.FAILED)
    now = utcnow()
    request = SearchRequest.model_validate({"query": ["q"], "platform": ["p"]})
    task = Task(
        task_id="t", request=request, queries=request.queries, platforms=["p"], fusion="rrf",
        deadline_at=now + timedelta(seconds=30), expires_at=now + timedelta(minutes=5),
    )  # fmt: skip
    written = {"logger", "latency_s", "kind", *events.run_fields(run), "state", "reason"}
    written |= set(events.search_fields(task))  # status, duration_s
    text = (INFRA / "monitoring.tf").read_text()
    assert len(hcl2.loads(text)["resource"]) >= 5
    read = set(re.findall(r"jsonPayload\.(\w+)", text))
    read |= set(re.findall(r'field = "(\w+)"', text))  # the for_each's EXTRACT(...) fields
    assert {"status", "platform", "outcome", "kind", "latency_s", "cost_usd"} <= read
    assert read <= written, read - written
