"""The timeline's rules (rules/timeline.py): what a fan-in and a finalization add to the task
document they write anyway, and how big the timeline can grow."""

from __future__ import annotations

from datetime import timedelta

from fanfuse.rules import lifecycle, timeline
from fanfuse.rules.mutations import Snapshot
from fanfuse.wire.models import PlatformRun, PlatformState, SearchRequest, Stage, Task
from tests.support.fakes import make_task

LEASE = timedelta(seconds=30)


def claimed(task: Task, run: PlatformRun, token: str) -> PlatformRun:
    now = task.created_at + timedelta(seconds=0.1)
    writes = lifecycle.claim(run.name, now, token, lease=LEASE)(Snapshot(task, {run.name: run}))
    assert writes is not None
    return writes.runs[0]


def test_a_fan_in_adds_its_platforms_entry_and_the_last_one_the_fan_in() -> None:
    task, runs = make_task("t1", ["a", "b"])
    start = task.created_at
    ended: list[PlatformRun] = []
    for i, run in enumerate(runs):
        run = claimed(task, run, f"tok{i}")
        outcome = lifecycle.Outcome(
            state=PlatformState.SUCCEEDED,
            timings={Stage.SEARCHING.value: 0.5, timeline.FIRST_RESULT: 0.25},
        )
        finish = timeline.finish(
            run.name,
            outcome,
            start + timedelta(seconds=1 + i),
            f"tok{i}",
            start + timedelta(seconds=0.05),
            start + timedelta(seconds=0.2),
        )
        writes = finish(Snapshot(task, {run.name: run}))
        assert writes is not None and writes.task is not None
        task = writes.task
        ended += writes.runs
    entries = {e.platform: e for e in task.timeline.runs}
    assert entries["a"].queued == 0.05 and entries["a"].started == 0.1
    assert entries["a"].working == 0.2 and entries["a"].first_result == 0.45
    assert entries["a"].stages == {"searching": 0.5} and entries["a"].finished == 1.0
    assert entries["b"].finished == 2.0
    assert task.timeline.fan_in == 2.0 and task.timeline.finalized is None

    final = timeline.finalize(start + timedelta(seconds=2.5), force=False, by="fan_in")
    writes = final(Snapshot(task, {r.name: r for r in ended}))
    assert writes is not None and writes.task is not None
    assert writes.task.timeline.finalized == 2.5 and writes.task.timeline.finalized_by == "fan_in"
    assert len(writes.task.timeline.runs) == 2  # the entries are kept


def test_a_deadline_records_the_stragglers_it_times_out() -> None:
    task, runs = make_task("t2", ["a", "b"])
    runs = [claimed(task, r, "tok") for r in runs]
    at = task.deadline_at + timedelta(seconds=1)
    writes = timeline.finalize(at, force=True)(Snapshot(task, {r.name: r for r in runs}))
    assert writes is not None and writes.task is not None
    kept = writes.task.timeline
    assert kept.finalized_by == "deadline"
    assert [(e.platform, e.state) for e in kept.runs] == [("a", "timed_out"), ("b", "timed_out")]
    assert kept.fan_in is not None


def test_the_timeline_of_15_platforms_and_5_queries_stays_small() -> None:
    """A fixed set of fields per platform, whatever the queries, results or calls: the task
    document (1 MiB cap, one write a fan-in) carries it easily."""
    names = [f"platform_{i:02d}" for i in range(15)]
    task, runs = make_task("t3", names)
    request = SearchRequest.model_validate(
        {"query": [f"q{i}" for i in range(5)], "platform": names}
    )
    task = task.model_copy(update={"request": request, "queries": request.queries})
    timings = {s.value: 12.3456 for s in Stage} | {timeline.FIRST_RESULT: 1.2345}
    for i, run in enumerate(runs):
        run = claimed(task, run, "tok").model_copy(update={"stages": list(Stage), "attempt": 3})
        outcome = lifecycle.Outcome(state=PlatformState.SUCCEEDED, timings=timings)
        late = task.created_at + timedelta(seconds=100 + i)
        writes = timeline.finish(run.name, outcome, late, "tok", late, late)(
            Snapshot(task, {run.name: run})
        )
        assert writes is not None and writes.task is not None
        task = writes.task
    writes = timeline.finalize(task.deadline_at, force=True)(
        Snapshot(task, {n: r for n, r in ((r.name, r) for r in runs)})
    )
    assert writes is not None and writes.task is not None
    size = len(writes.task.timeline.model_dump_json())
    assert len(writes.task.timeline.runs) == 15
    assert size < 6_000, size  # about 380 bytes a platform
