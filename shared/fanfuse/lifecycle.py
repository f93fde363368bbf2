"""The rules of a search's life, as pure functions that run inside a store transaction.

Each takes a Snapshot and returns the documents to write (or None: nothing to do). Because they
only look at what the transaction read, running one twice, or concurrently, changes nothing the
second time: a platform is counted once, a task is finalized once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from fanfuse import fusion, progress
from fanfuse.errors import TaskConflict, UnknownPlatform
from fanfuse.models import (
    Hit,
    PlatformError,
    PlatformRun,
    PlatformState,
    Progress,
    Stage,
    TaskStatus,
)
from fanfuse.store.base import Mutator, Snapshot, Writes


@dataclass
class Outcome:
    """How one platform run ended, as the worker saw it."""

    state: PlatformState
    results: list[Hit] = field(default_factory=list)
    error: str | None = None
    message: str = ""
    provider: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    calls: list[dict[str, object]] = field(default_factory=list)


def claim(name: str, now: datetime) -> Mutator:
    """queued (or running, after a crash and redelivery) -> running; a no-op once terminal."""

    def mutate(snap: Snapshot) -> Writes | None:
        if name not in snap.runs:
            raise UnknownPlatform(name)
        run = snap.runs[name]
        if snap.task.status.terminal or run.state.terminal:
            return None
        stage = Stage.SEARCHING
        run = run.model_copy(
            update={
                "state": PlatformState.RUNNING,
                "attempt": run.attempt + 1,
                "stage": progress.stage_name(name, stage, run.of),
                "progress": run.progress.model_copy(update={"current": 0, "total": 0}),
                "percent": 0.0,
                "message": progress.platform_message(
                    run.index, run.of, name, progress.stage_message(stage, "querying")
                ),
                "started_at": run.started_at or now,
                "updated_at": now,
            }
        )
        return Writes(runs=[run])

    return mutate


def _store_contents(hits: list[Hit]) -> tuple[list[Hit], dict[str, str]]:
    """Page content leaves the platform document for `contents/{id}` (1 MiB document cap)."""
    stored: list[Hit] = []
    contents: dict[str, str] = {}
    for hit in hits:
        if hit.content:
            cid = fusion.content_id(hit.url)
            contents[cid] = hit.content
            hit = hit.model_copy(update={"content": None, "content_id": cid})
        stored.append(hit)
    return stored, contents


def finish(name: str, outcome: Outcome, now: datetime) -> Mutator:
    """The fan-in: record the run's end and count it on the task, exactly once."""

    def mutate(snap: Snapshot) -> Writes | None:
        task, run = snap.task, snap.runs[name]
        if run.state.terminal:
            return None
        if task.status.terminal:
            # Cancelled (or finalized without us): nothing of ours may land after that.
            if run.state is PlatformState.CANCELLED:
                return None
            state = (
                PlatformState.CANCELLED
                if task.status is TaskStatus.CANCELLED
                else PlatformState.TIMED_OUT
            )
            return Writes(runs=[_ended(run, state, None, "Stopped: search already finished", now)])
        hits, contents = _store_contents(outcome.results)
        message = outcome.message or (
            progress.found_message(len(hits))
            if outcome.state is PlatformState.SUCCEEDED
            else f"Failed: {outcome.error}"
        )
        ended = _ended(run, outcome.state, outcome.error, message, now).model_copy(
            update={
                "results": hits,
                "provider": outcome.provider,
                "timings": {**run.timings, **outcome.timings},
                "calls": [*run.calls, *outcome.calls],
            }
        )
        counters = task.counters.model_copy(
            update={
                "done": task.counters.done + 1,
                "failed": task.counters.failed + (outcome.state is not PlatformState.SUCCEEDED),
            }
        )
        n = len(task.platforms)
        task = task.model_copy(
            update={
                "status": TaskStatus.RUNNING,
                "counters": counters,
                "progress": Progress(
                    percent=round(100.0 * counters.done / n, 2),
                    stage=ended.stage,
                    message=ended.message,
                ),
                "updated_at": now,
            }
        )
        return Writes(task=task, runs=[ended], contents=contents)

    return mutate


def _ended(
    run: PlatformRun, state: PlatformState, error: str | None, message: str, now: datetime
) -> PlatformRun:
    return run.model_copy(
        update={
            "state": state,
            "error": error,
            "percent": 100.0,
            "message": progress.platform_message(run.index, run.of, run.name, message),
            "finished_at": now,
            "updated_at": now,
        }
    )


def finalize(now: datetime, *, force: bool) -> Mutator:
    """Fuse, rank, limit and set the final status: only from a non-terminal status.

    Waits (declines) while platforms are still running, unless `force` (the deadline) or the
    deadline has passed; then the stragglers become `timed_out`.
    """

    def mutate(snap: Snapshot) -> Writes | None:
        task = snap.task
        if task.status.terminal:
            return None
        runs = [snap.runs[p] for p in task.platforms if p in snap.runs]
        stragglers = [r for r in runs if not r.state.terminal]
        if stragglers and not force and now < task.deadline_at:
            return None
        timed_out = [
            _ended(r, PlatformState.TIMED_OUT, "no result before the deadline", "Timed out", now)
            for r in stragglers
        ]
        final_runs = [next((t for t in timed_out if t.name == r.name), r) for r in runs]
        succeeded = [r for r in final_runs if r.state is PlatformState.SUCCEEDED]
        per_platform = {r.name: r.results for r in succeeded}
        results, by_query = fusion.fuse_queries(
            task.queries, per_platform, task.fusion, task.request.max_results, task.request.weights
        )
        summary = progress.summarize(final_runs, len(results))
        errors = [
            PlatformError(platform=r.name, state=r.state, error=r.error or r.state.value)
            for r in final_runs
            if r.state is not PlatformState.SUCCEEDED
        ]
        if not succeeded:
            status = TaskStatus.FAILED
        elif errors:
            status = TaskStatus.PARTIAL
        else:
            status = TaskStatus.COMPLETED
        error = None
        if status is TaskStatus.FAILED:
            error = f"All {len(final_runs)} platforms failed: " + "; ".join(
                f"{e.platform}: {e.error}" for e in errors
            )
        task = task.model_copy(
            update={
                "status": status,
                "summary": summary,
                "errors": errors,
                "error": error,
                "results": results,
                "results_by_query": by_query if len(task.queries) > 1 else [],
                "progress": Progress(percent=100.0, stage=status.value, message=summary.message),
                "updated_at": now,
                "finalized_at": now,
            }
        )
        return Writes(task=task, runs=timed_out)

    return mutate


def cancel(now: datetime) -> Mutator:
    """Any non-terminal task -> cancelled; its unfinished platforms -> cancelled. 409 once over."""

    def mutate(snap: Snapshot) -> Writes | None:
        task = snap.task
        if task.status.terminal:
            raise TaskConflict(f"search {task.task_id} is already {task.status.value}")
        runs = [
            _ended(r, PlatformState.CANCELLED, None, "Cancelled", now)
            for r in snap.runs.values()
            if not r.state.terminal
        ]
        summary = progress.summarize(
            [next((c for c in runs if c.name == r.name), r) for r in snap.runs.values()], 0
        )
        task = task.model_copy(
            update={
                "status": TaskStatus.CANCELLED,
                "summary": summary.model_copy(update={"message": "Search cancelled"}),
                "progress": Progress(
                    percent=task.progress.percent, stage="cancelled", message="Search cancelled"
                ),
                "updated_at": now,
                "finalized_at": now,
            }
        )
        return Writes(task=task, runs=runs)

    return mutate
