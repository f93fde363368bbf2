"""The timeline's rules: what a fan-in and a finalization add to `Task.timeline`.

They wrap the lifecycle's mutators (`lifecycle.finish`, `finalize`, `cancel`) rather than change
them: each runs the rule it wraps and adds to the task document that rule writes anyway, so the
timeline costs no write of its own. The design's budget holds: the task document is written at
the start, once per platform at its fan-in and once at the finalization, about one write a
second at most, timeline included. Pure, as the rules they wrap (a store may run them twice).

What a fan-in knows besides the documents comes in from its worker: when its task was enqueued
(the carrier of `tracing.delivery`) and when its stages began; the stages' durations and the
first result come from the run's `timings` (stages/pipeline.py, stages/searching.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from fanfuse.fusion.rerank_contract import RerankOrder
from fanfuse.rules import lifecycle
from fanfuse.rules.mutations import Mutator, Snapshot, Writes
from fanfuse.wire.models import PlatformRun, Task
from fanfuse.wire.timeline import Finalizer, RunTimeline, Timeline

FIRST_RESULT = "first_result"
"""The `timings` key of the seconds from a run's searching stage to its first results."""


def offset(task: Task, when: datetime | None) -> float | None:
    """Seconds from the request's arrival to `when`, to the millisecond."""
    return None if when is None else round((when - task.created_at).total_seconds(), 3)


def run_entry(
    task: Task, run: PlatformRun, queued_at: datetime | None, working_at: datetime | None
) -> RunTimeline:
    """An ended run as the timeline keeps it."""
    working = offset(task, working_at)
    stages = {s.value: run.timings[s.value] for s in run.stages if s.value in run.timings}
    first = run.timings.get(FIRST_RESULT)
    return RunTimeline(
        platform=run.name,
        state=run.state.value,
        attempt=max(run.attempt, 1),
        queued=offset(task, queued_at),
        started=offset(task, run.started_at),
        working=working,
        first_result=round(working + first, 3)
        if working is not None and first is not None
        else None,
        stages=stages,
        finished=offset(task, run.finished_at),
        calls=len(run.calls),
    )


def live(task: Task, runs: list[PlatformRun]) -> Timeline:
    """The timeline as it stands: the task document's entries, and one for each platform not
    ended yet, from its platform document (while a search runs, its status shows them)."""
    known = {e.platform for e in task.timeline.runs}
    running = [run_entry(task, r, None, None) for r in runs if r.name not in known]
    by_name = {e.platform: e for e in [*task.timeline.runs, *running]}
    ordered = [by_name[p] for p in task.platforms if p in by_name]
    return task.timeline.model_copy(update={"runs": ordered})


def _with_runs(task: Task, entries: list[RunTimeline]) -> Timeline:
    """The task's timeline with `entries` in (a platform's newer entry replaces its older one),
    in the task's platform order, and the fan-in once every platform has one."""
    by_name = {e.platform: e for e in task.timeline.runs} | {e.platform: e for e in entries}
    runs = [by_name[p] for p in task.platforms if p in by_name]
    fan_in = task.timeline.fan_in
    if fan_in is None and len(runs) == len(task.platforms):
        fan_in = max((r.finished for r in runs if r.finished is not None), default=None)
    return task.timeline.model_copy(update={"runs": runs, "fan_in": fan_in})


def at_fan_in(
    mutate: Mutator, name: str, queued_at: datetime | None, working_at: datetime | None
) -> Mutator:
    """`mutate` (a fan-in: lifecycle.finish), with platform `name`'s entry added to the task
    document it writes."""

    def recorded(snap: Snapshot) -> Writes | None:
        writes = mutate(snap)
        ended = [r for r in writes.runs if r.name == name] if writes is not None else []
        if writes is None or writes.task is None or not ended:
            return writes
        entry = run_entry(writes.task, ended[0], queued_at, working_at)
        task = writes.task.model_copy(update={"timeline": _with_runs(writes.task, [entry])})
        return Writes(task=task, runs=writes.runs, contents=writes.contents)

    recorded.__qualname__ = mutate.__qualname__  # the rule it is, for a trace's span name
    return recorded


def at_final(mutate: Mutator, by: Finalizer) -> Mutator:
    """`mutate` (lifecycle.finalize or cancel), with the finalization and the runs it ended
    (stragglers timed out, cancelled) added to the task document, once it is terminal."""

    def recorded(snap: Snapshot) -> Writes | None:
        writes = mutate(snap)
        if writes is None or writes.task is None or not writes.task.status.terminal:
            return writes
        task = writes.task
        known = {e.platform for e in task.timeline.runs}
        entries = [run_entry(task, r, None, None) for r in writes.runs if r.name not in known]
        timeline = _with_runs(task, entries).model_copy(
            update={
                "finalized": offset(task, task.finalized_at or task.updated_at),
                "finalized_by": by,
            }
        )
        return Writes(
            task=task.model_copy(update={"timeline": timeline}),
            runs=writes.runs,
            contents=writes.contents,
        )

    recorded.__qualname__ = mutate.__qualname__
    return recorded


# The lifecycle's rules with their timeline, as the service runs them.


def finish(
    name: str,
    outcome: lifecycle.Outcome,
    now: datetime,
    token: str,
    queued_at: datetime | None,
    working_at: datetime | None,
) -> Mutator:
    """`lifecycle.finish` (the fan-in), recording the run's entry: `queued_at`, when its task
    was enqueued; `working_at`, when its stages began."""
    return at_fan_in(lifecycle.finish(name, outcome, now, token), name, queued_at, working_at)


def finalize(
    now: datetime,
    *,
    force: bool,
    reranked: Mapping[int, RerankOrder] | None = None,
    by: Finalizer | None = None,
) -> Mutator:
    """`lifecycle.finalize`, recording who finalized (by default the deadline task when
    `force`, else the aggregate task) and when."""
    who: Finalizer = by or ("deadline" if force else "aggregate")
    return at_final(lifecycle.finalize(now, force=force, reranked=reranked), who)


def cancel(now: datetime) -> Mutator:
    """`lifecycle.cancel`, recording the cancel as the finalization."""
    return at_final(lifecycle.cancel(now), "cancel")
