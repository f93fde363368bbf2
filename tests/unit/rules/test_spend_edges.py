"""A late settlement is a change of the task: found by mutation testing (`scripts/mutants
budget`, docs/mutants.md), the one claim of rules/spend.py its other tests left unasserted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fanfuse.rules import lifecycle, spend
from fanfuse.rules.mutations import Snapshot
from fanfuse.wire.models import CallRecord, HeldCall, TaskStatus
from tests.support.fakes import make_task

START = datetime(2026, 11, 25, 12, tzinfo=UTC)


def test_a_late_settlement_marks_the_task_changed_when_it_lands() -> None:
    """The receipt of a cancelled search changes when its late worker settles: the task's
    `updated_at` moves to that moment, so a poller or a watcher of the document (which reads
    the change) sees the new total. Kills `updated_at` misspelt in the task's update."""
    task, [run] = make_task("t1", ["paid"])
    claim = lifecycle.claim("paid", START, "w1", lease=timedelta(seconds=30))
    claimed = claim(Snapshot(task=task, runs={"paid": run}))
    assert claimed is not None
    hold = HeldCall(id="a", usd=1.0, lease="w1", at=START)
    running = claimed.runs[0].model_copy(update={"held_calls": [hold]})
    cancelled = lifecycle.cancel(START + timedelta(seconds=1))(
        Snapshot(task=task, runs={"paid": running})
    )
    assert cancelled is not None and cancelled.task is not None
    late = START + timedelta(seconds=5)
    answer = CallRecord(platform="paid", status=200, cost_usd=0.25, hold="a")
    settle = spend.settle_late("paid", "w1", [answer], late)
    writes = settle(Snapshot(task=cancelled.task, runs={"paid": cancelled.runs[0]}))
    assert writes is not None and writes.task is not None
    assert writes.task.status is TaskStatus.CANCELLED
    assert (writes.task.cost.total_usd, writes.task.updated_at) == (0.25, late)
