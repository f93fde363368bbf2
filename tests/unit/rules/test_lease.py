"""Leases on platform runs, progress writes only from the holder, counters that match the summary.

The rules are lifecycle's pure functions; here they run in the SQLite store's transactions, as
the embedded runtime runs them, and in the DynamoDB store's (moto); tests/support/store_contract.py
runs them on every store, Firestore included.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from fanfuse.platforms import Registry
from fanfuse.queue.port import PlatformMessage
from fanfuse.rules import lifecycle, progress
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.ports import TaskStore
from fanfuse.wire.errors import LeaseHeld
from fanfuse.wire.models import PlatformRun, PlatformState, TaskStatus, utcnow
from tests.support.fakes import Clock, FakePlatform, HeldQueue

pytestmark = pytest.mark.every_store  # on SQLite and on DynamoDB (tests/unit/conftest.py)

LEASE = timedelta(seconds=30)


@dataclass
class Running:
    """A search of one gated platform whose first delivery is in the provider call."""

    service: SearchService
    platform: FakePlatform
    gate: asyncio.Event
    message: PlatformMessage
    first: asyncio.Task[str]


async def running(
    store: TaskStore, settings: Settings, clock: Callable[[], datetime] = utcnow
) -> Running:
    gate = asyncio.Event()
    platform = FakePlatform("docs", gate=gate)
    queue = HeldQueue()
    service = SearchService(store, queue, Registry.of([platform]), settings, clock=clock)
    service.start({"query": "q", "platform": "docs"})
    message = queue.platforms[0]
    first = asyncio.create_task(service.run_platform(message))
    for _ in range(50):  # bounded: until the first delivery is in the provider call
        if platform.calls:
            break
        await asyncio.sleep(0.01)
    assert platform.calls == 1
    return Running(service, platform, gate, message, first)


class Renewals:
    """The heartbeat's lease renewals as the store sees them, one by one: `patch_run` calls that
    set `lease_until`, made from the heartbeat's thread, each handed to the test's loop with its
    answer (False: refused, the run is another's) as it returns."""

    def __init__(self, store: TaskStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: asyncio.Queue[tuple[str, bool]] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        patch = store.patch_run

        def spy(task_id: str, name: str, fields: dict[str, Any], *, lease: str | None) -> bool:
            kept = patch(task_id, name, fields, lease=lease)
            if "lease_until" in fields:
                loop.call_soon_threadsafe(self.seen.put_nowait, (fields["lease_until"], kept))
            return kept

        monkeypatch.setattr(store, "patch_run", spy)

    async def next(self) -> tuple[str, bool]:
        async with asyncio.timeout(30):  # a bound on a failure (no renewal), not a measure
            return await self.seen.get()


def started(store: TaskStore, settings: Settings, *names: str) -> str:
    registry = Registry.of([FakePlatform(n) for n in names])
    service = SearchService(store, HeldQueue(), registry, settings)
    return service.start({"query": "q", "platform": list(names)}).task_id


def run_of(store: TaskStore, task_id: str, name: str) -> PlatformRun:
    return next(r for r in store.get_runs(task_id) if r.name == name)


def test_a_claim_leases_the_run_for_the_lease_length(store: TaskStore, settings: Settings) -> None:
    task_id = started(store, settings, "docs")
    now = utcnow()
    claimed = store.transact(task_id, ["docs"], lifecycle.claim("docs", now, "w1", lease=LEASE))
    assert claimed is not None
    run, task = claimed.runs[0], store.get_task(task_id)
    assert task is not None
    assert (run.lease, run.lease_until, run.attempt) == ("w1", now + LEASE, 1)
    assert lifecycle.lease_left(run, now) == LEASE.total_seconds()


def test_a_duplicate_while_the_lease_is_live_is_refused_then_takes_over_after(
    store: TaskStore, settings: Settings
) -> None:
    task_id = started(store, settings, "docs")
    now = utcnow()
    store.transact(task_id, ["docs"], lifecycle.claim("docs", now, "w1", lease=LEASE))
    before = run_of(store, task_id, "docs")
    with pytest.raises(LeaseHeld) as info:
        store.transact(
            task_id,
            ["docs"],
            lifecycle.claim("docs", now + timedelta(seconds=5), "w2", lease=LEASE),
        )
    assert info.value.status_code == 503
    assert info.value.retry_after_s == pytest.approx(lifecycle.lease_left(before, now) - 5)
    assert run_of(store, task_id, "docs") == before  # nothing written
    assert before.lease_until is not None
    lapsed = before.lease_until + timedelta(seconds=1)
    taken = store.transact(task_id, ["docs"], lifecycle.claim("docs", lapsed, "w2", lease=LEASE))
    assert taken is not None
    assert (taken.runs[0].lease, taken.runs[0].attempt) == ("w2", 2)


def test_an_ended_run_holds_no_lease(store: TaskStore, settings: Settings) -> None:
    task_id = started(store, settings, "docs")
    store.transact(task_id, ["docs"], lifecycle.claim("docs", utcnow(), "w1", lease=LEASE))
    outcome = lifecycle.Outcome(state=PlatformState.SUCCEEDED)
    store.transact(task_id, ["docs"], lifecycle.finish("docs", outcome, utcnow(), "w1"))
    ended = run_of(store, task_id, "docs")
    assert lifecycle.lease_left(ended, utcnow()) == 0
    assert (
        store.transact(task_id, ["docs"], lifecycle.claim("docs", utcnow(), "w2", lease=LEASE))
        is None
    )


def test_progress_lands_only_from_the_holder_of_a_running_run(
    store: TaskStore, settings: Settings
) -> None:
    task_id = started(store, settings, "docs")
    assert not store.patch_run(task_id, "docs", {"message": "early"}, lease="w1")
    store.transact(task_id, ["docs"], lifecycle.claim("docs", utcnow(), "w1", lease=LEASE))
    assert not store.patch_run(task_id, "docs", {"message": "intruder"}, lease="w2")
    assert not store.patch_run(task_id, "docs", {"message": "anonymous"}, lease=None)
    assert store.patch_run(task_id, "docs", {"message": "mine"}, lease="w1")
    assert run_of(store, task_id, "docs").message == "mine"


@pytest.mark.parametrize("end", ["finish", "cancel", "deadline"])
def test_a_late_progress_write_never_changes_an_ended_run(
    store: TaskStore, settings: Settings, end: str
) -> None:
    task_id = started(store, settings, "docs")
    store.transact(task_id, ["docs"], lifecycle.claim("docs", utcnow(), "w1", lease=LEASE))
    if end == "finish":
        outcome = lifecycle.Outcome(state=PlatformState.SUCCEEDED)
        store.transact(task_id, ["docs"], lifecycle.finish("docs", outcome, utcnow(), "w1"))
    elif end == "cancel":
        store.transact(task_id, None, lifecycle.cancel(utcnow()))
    else:
        store.transact(task_id, None, lifecycle.finalize(utcnow(), force=True))
    ended = run_of(store, task_id, "docs")
    late = {"stage": "compressing", "percent": 66.67, "message": "late"}
    assert not store.patch_run(task_id, "docs", late, lease="w1")
    assert run_of(store, task_id, "docs") == ended and ended.state.terminal


def test_counters_agree_with_the_summary_after_a_deadline_finalization(
    store: TaskStore, settings: Settings
) -> None:
    """The issue's case: 2 platforms, one succeeded, one timed out by the deadline."""
    task_id = started(store, settings, "a", "b")
    for name in ("a", "b"):
        store.transact(task_id, [name], lifecycle.claim(name, utcnow(), name, lease=LEASE))
    outcome = lifecycle.Outcome(state=PlatformState.SUCCEEDED)
    store.transact(task_id, ["a"], lifecycle.finish("a", outcome, utcnow(), "a"))
    store.transact(task_id, None, lifecycle.finalize(utcnow(), force=True))
    task = store.get_task(task_id)
    assert task is not None and task.summary is not None
    assert task.status is TaskStatus.PARTIAL
    assert (task.counters.done, task.counters.failed) == (2, 1)
    assert (task.summary.succeeded, task.summary.timed_out) == (1, 1)
    assert task.summary.message.endswith("(1 failed)")


def test_counters_agree_with_the_summary_after_a_cancel(
    store: TaskStore, settings: Settings
) -> None:
    task_id = started(store, settings, "a", "b", "c")
    for name in ("a", "b"):
        store.transact(task_id, [name], lifecycle.claim(name, utcnow(), name, lease=LEASE))
    outcome = lifecycle.Outcome(state=PlatformState.SUCCEEDED)
    store.transact(task_id, ["a"], lifecycle.finish("a", outcome, utcnow(), "a"))
    store.transact(task_id, None, lifecycle.cancel(utcnow()))
    task = store.get_task(task_id)
    assert task is not None and task.summary is not None
    assert (task.counters.done, task.counters.failed) == (3, 2)
    assert (task.summary.succeeded, task.summary.cancelled) == (1, 2)
    assert task.counters == progress.tally(store.get_runs(task_id))


async def test_a_duplicate_delivery_during_the_run_calls_no_provider(
    store: TaskStore, settings: Settings
) -> None:
    r = await running(store, settings)
    for _ in range(10):
        with pytest.raises(LeaseHeld):
            await r.service.run_platform(r.message)
    r.gate.set()
    assert await asyncio.wait_for(r.first, 10) == "succeeded"
    assert r.platform.calls == 1
    assert await r.service.run_platform(r.message) == "skipped" and r.platform.calls == 1
    run = run_of(store, r.message.task_id, "docs")
    assert (run.state, run.attempt) == (PlatformState.SUCCEEDED, 1)


def test_only_the_lease_holder_ends_the_run(store: TaskStore, settings: Settings) -> None:
    """A worker that stalled past its lease, after another delivery took the run over, reports
    late: its outcome must not end the run under the new holder."""
    task_id = started(store, settings, "docs")
    now = utcnow()
    store.transact(task_id, ["docs"], lifecycle.claim("docs", now, "w1", lease=LEASE))
    store.transact(task_id, ["docs"], lifecycle.claim("docs", now + 2 * LEASE, "w2", lease=LEASE))
    failed = lifecycle.Outcome(state=PlatformState.FAILED, error="stale")
    assert store.transact(task_id, ["docs"], lifecycle.finish("docs", failed, now, "w1")) is None
    assert run_of(store, task_id, "docs").state is PlatformState.RUNNING
    done = lifecycle.Outcome(state=PlatformState.SUCCEEDED)
    assert store.transact(task_id, ["docs"], lifecycle.finish("docs", done, now, "w2"))
    assert run_of(store, task_id, "docs").state is PlatformState.SUCCEEDED


async def test_a_working_worker_renews_its_lease_so_no_duplicate_takes_over(
    store: TaskStore, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lease of 1.5 s, renewed by the heartbeat every third of it while the provider call
    lasts. The service's clock is the test's: after each renewal it moves two thirds of a lease,
    and a duplicate then is refused, three times over. Unrenewed, the first lease (1.5 s) would
    have lapsed by the second duplicate (at 2 s); the run is attempted once."""
    clock = Clock(utcnow())
    settings = settings.model_copy(update={"lease_seconds": 1.5})
    renewals = Renewals(store, monkeypatch)
    r = await running(store, settings, clock)
    lease = timedelta(seconds=1.5)
    for _ in range(3):
        renewed = clock.now + lease
        while True:  # until a renewal made at the clock's present time (none may be refused)
            until, kept = await renewals.next()
            assert kept
            if datetime.fromisoformat(until) == renewed:
                break
        assert run_of(store, r.message.task_id, "docs").lease_until == renewed
        clock.now += lease * 2 / 3
        with pytest.raises(LeaseHeld):
            await r.service.run_platform(r.message)
    r.gate.set()
    assert await asyncio.wait_for(r.first, 10) == "succeeded"
    run = run_of(store, r.message.task_id, "docs")
    assert (run.attempt, r.platform.calls) == (1, 1)


async def test_a_worker_whose_run_was_taken_over_stops_and_records_nothing(
    store: TaskStore, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first worker's renewal finds another holder: it stops at its next step (the gate
    opens), its outcome is discarded, and the taker's run is the one that ends the platform."""
    settings = settings.model_copy(update={"lease_seconds": 1.5})
    renewals = Renewals(store, monkeypatch)
    r = await running(store, settings)
    later = utcnow() + 2 * LEASE  # as if the first worker stalled past its lease
    store.transact(r.message.task_id, ["docs"], lifecycle.claim("docs", later, "w2", lease=LEASE))
    while (await renewals.next())[1]:  # until the first worker's renewal is refused
        pass
    r.gate.set()
    assert await asyncio.wait_for(r.first, 10) == "discarded"
    run = run_of(store, r.message.task_id, "docs")
    assert (run.state, run.lease, run.attempt) == (PlatformState.RUNNING, "w2", 2)
