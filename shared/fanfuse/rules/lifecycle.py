"""The rules of a search's life, as pure functions that run inside a store transaction.

Each takes a Snapshot and returns the documents to write (or None: nothing to do). Because they
only look at what the transaction read, running one twice, or concurrently, changes nothing the
second time: a platform is counted once, a task is finalized once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fanfuse.fusion import fuse as fusion
from fanfuse.fusion.rerank_contract import RerankOrder
from fanfuse.rules import aggregate, progress, spend
from fanfuse.rules.mutations import Mutator, Snapshot, Writes
from fanfuse.wire.errors import LeaseHeld, TaskConflict, TaskExpired, UnknownPlatform
from fanfuse.wire.models import (
    CacheNote,
    CallRecord,
    FailureKind,
    Hit,
    LimitCut,
    PlatformRun,
    PlatformState,
    Progress,
    QueryFailure,
    Stage,
    Task,
    TaskStatus,
)
from fanfuse.wire.options import OptionUse


@dataclass
class Outcome:
    """How one platform run ended, as the worker saw it."""

    state: PlatformState
    results: list[Hit] = field(default_factory=list)
    error: str | None = None
    message: str = ""
    provider: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    calls: list[CallRecord] = field(default_factory=list)
    options: dict[str, OptionUse] = field(default_factory=dict)
    failed_queries: list[QueryFailure] = field(default_factory=list)
    cache: CacheNote | None = None
    failure: FailureKind | None = None
    """A failed run's kind, for the platform's breaker (breaker.py); None: not the provider's."""
    retry_at: datetime | None = None
    """`suspended`: when the platform's breaker lets a call through again."""
    limits: dict[str, LimitCut] = field(default_factory=dict)
    """The per-search caps that cut this run (limits.py)."""


def claim(name: str, now: datetime, token: str, *, lease: timedelta) -> Mutator:
    """queued (or running, once its lease lapsed) -> running, leased to `token` until `now` +
    `lease`; a no-op once terminal.

    A live lease means a worker may still be calling the provider: a duplicate delivery in that
    time raises LeaseHeld (retryable, no provider call) instead of starting the platform again
    and spending the provider's quota twice. The lease is short and its worker renews it while it
    works (heartbeat.py), so a worker that died (killed, its instance gone) is taken over within
    one lease, while the search still has time, instead of at the deadline: the next delivery
    takes over with `attempt` + 1.
    """

    def mutate(snap: Snapshot) -> Writes | None:
        if name not in snap.runs:
            raise UnknownPlatform(name)
        run = snap.runs[name]
        if snap.task.status.terminal or run.state.terminal:
            return None
        left = lease_left(run, now)
        if left > 0 and run.lease != token:
            raise LeaseHeld(f"{name} of {snap.task.task_id} is leased to another delivery", left)
        stage = Stage.SEARCHING
        run = run.model_copy(
            update={
                "state": PlatformState.RUNNING,
                "attempt": run.attempt + 1,
                "lease": token,
                "lease_until": now + lease,
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


def release(name: str, token: str) -> Mutator:
    """Give up `token`'s lease on a run still running: its worker stops without an outcome (the
    process is shutting down), so the next delivery, or a restarted runtime's resume, takes over
    at once instead of waiting out the lease. A no-op unless `token` still holds the run."""

    def mutate(snap: Snapshot) -> Writes | None:
        run = snap.runs.get(name)
        if run is None or run.state is not PlatformState.RUNNING or run.lease != token:
            return None
        return Writes(runs=[run.model_copy(update={"lease": None, "lease_until": None})])

    return mutate


def lease_left(run: PlatformRun, now: datetime) -> float:
    """Seconds left on a running run's lease (0: none, or lapsed); a queued or ended run holds
    no lease, whatever its fields say."""
    if run.state is not PlatformState.RUNNING or run.lease_until is None:
        return 0.0
    return max(0.0, (run.lease_until - now).total_seconds())


def progress_accepted(run: PlatformRun, token: str | None) -> bool:
    """A progress write lands only while the run is `running` and from its lease holder.

    A worker whose run has ended (finished, cancelled, timed out by the deadline) or whose lease
    was taken over must not write: its write would resurrect an ended run's stage and percent, or
    overwrite the new holder's progress.
    """
    return run.state is PlatformState.RUNNING and token is not None and run.lease == token


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


def finish(name: str, outcome: Outcome, now: datetime, token: str) -> Mutator:
    """The fan-in: record the run's end and count it on the task, exactly once, from the run's
    lease holder only: a worker whose lease was taken over (it stalled past its lease, and another
    delivery runs the platform now) must not end the run under its new holder. Its call records
    settle the holds they answer in the same write (spend.py); a worker whose outcome does not
    land here settles its holds with `spend.settle_late`."""

    def mutate(snap: Snapshot) -> Writes | None:
        task, run = snap.task, snap.runs[name]
        if run.state.terminal or run.lease != token:
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
            return Writes(
                runs=[
                    aggregate.ended_run(run, state, None, "Stopped: search already finished", now)
                ]
            )
        hits, contents = _store_contents(outcome.results)
        message = outcome.message or (
            progress.found_message(len(hits))
            if outcome.state is PlatformState.SUCCEEDED
            else f"Failed: {outcome.error}"
        )
        ended = aggregate.ended_run(run, outcome.state, outcome.error, message, now).model_copy(
            update={
                "results": hits,
                "provider": outcome.provider,
                "timings": {**run.timings, **outcome.timings},
                "calls": [*run.calls, *outcome.calls],
                "held_calls": spend.settled_holds(run, outcome.calls),  # answered: now records
                "options": outcome.options,
                "failed_queries": outcome.failed_queries,
                "failure": outcome.failure,
                "cache": outcome.cache,
                "retry_at": outcome.retry_at,
                "limits": outcome.limits,
            }
        )
        counters = progress.add_ended(task.counters, [ended])
        task = task.model_copy(
            update={
                "status": TaskStatus.RUNNING,
                "counters": counters,
                "progress": progress.at_fan_in(counters.done, len(task.platforms), ended),
                "updated_at": now,
            }
        )
        return Writes(task=task, runs=[ended], contents=contents)

    return mutate


def finalization_due(
    task: Task, runs: Sequence[PlatformRun], now: datetime, *, force: bool
) -> bool:
    """A search is finalized once every platform has ended, or at its deadline (`force`, or a
    late call): never while platforms still run within their time."""
    if task.status.terminal:
        return False
    running = any(not r.state.terminal for r in runs)
    return not running or force or now >= task.deadline_at


def finalized_at_fan_in(task: Task) -> bool:
    """Whether the last platform's worker may finalize its search right after its fan-in.

    Fusing what the platforms stored is quick and needs nothing outside the store, so the last
    worker can run the `finalize` transaction in its own delivery, right after its fan-in
    committed, instead of leaving it to another delivery of the aggregate task: one queue hop
    less between the slowest platform's answer and the final one. A mode that reranks calls a
    reranker (an LLM, a model) first, which must not lengthen a platform delivery nor run in a
    transaction: its finalization stays with the aggregate task. Either way the deadline task
    is the backstop, and `finalize` lands once, whoever calls it.
    """
    return not task.request.reranks


def finalize(
    now: datetime, *, force: bool, reranked: Mapping[int, RerankOrder] | None = None
) -> Mutator:
    """Finalize once, only from a non-terminal status (see `aggregate.final_document`).

    Waits (declines) while platforms are still running, unless `force` (the deadline) or the
    deadline has passed; then the stragglers become `timed_out`. `reranked`: the orders the
    service got for the candidate pool of a mode that reranks.
    """

    def mutate(snap: Snapshot) -> Writes | None:
        task = snap.task
        runs = [snap.runs[p] for p in task.platforms if p in snap.runs]
        if not finalization_due(task, runs, now, force=force):
            return None
        final = aggregate.final_document(task, runs, now, reranked)
        return Writes(task=final.task, runs=final.ended)

    return mutate


def expired(task: Task, now: datetime) -> bool:
    """Past `expires_at`, a search is gone even while its documents wait for the purge (SQLite's
    sweep, Firestore's TTL policy, which may lag by a day): status and cancel answer 410, so what
    is served never depends on when the purge ran."""
    return now >= task.expires_at


def too_late_to_start(task: Task, now: datetime, min_fraction: float) -> bool:
    """Whether a task just written has less than `min_fraction` of its time budget left.

    The deadline runs from the moment the request arrived (`created_at`), because that is what
    the caller counts from; if storage took most of it, the 202 would promise a search that can
    only time out. Refusing (503) lets the caller retry when the store is itself again.
    """
    budget = task.deadline_at - task.created_at
    return task.deadline_at - now < budget * min_fraction


def cancel(now: datetime) -> Mutator:
    """Any non-terminal task -> cancelled; its unfinished platforms -> cancelled. 409 once over,
    410 once expired (checked in the transaction, like the terminal state)."""

    def mutate(snap: Snapshot) -> Writes | None:
        task = snap.task
        if expired(task, now):
            raise TaskExpired(task.task_id, task.owner)
        if task.status.terminal:
            raise TaskConflict(f"search {task.task_id} is already {task.status.value}")
        runs = [
            aggregate.ended_run(r, PlatformState.CANCELLED, None, "Cancelled", now)
            for r in snap.runs.values()
            if not r.state.terminal
        ]
        final_runs = [next((c for c in runs if c.name == r.name), r) for r in snap.runs.values()]
        summary = progress.summarize(final_runs, 0)
        task = task.model_copy(
            update={
                "status": TaskStatus.CANCELLED,
                "counters": progress.tally(final_runs),
                "summary": summary.model_copy(update={"message": "Search cancelled"}),
                # what was spent until the cancel, the calls still in flight included (held)
                "cost": spend.receipt(task.cost, final_runs),
                "progress": Progress(
                    percent=task.progress.percent, stage="cancelled", message="Search cancelled"
                ),
                "updated_at": now,
                "finalized_at": now,
            }
        )
        return Writes(task=task, runs=runs)

    return mutate
