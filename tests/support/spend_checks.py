"""The spend ledger's acceptance (issue 29, item 1), one contract for every store: SQLite
(tests/integration/test_spend_ledger.py), the Firestore emulator (tests/e2e) and DynamoDB on
moto (tests/aws), each a subclass of `SpendLedgerContract` that gives its `ledger` harness.

A key with a daily budget of $1 and a platform priced $1 a request whose provider (the stub
SearXNG on 127.0.0.1) answers after 1.5 s: whatever the caller does (cancel at any moment, let
`timeout_s` run out, have a worker killed mid-call), the provider is paid for at most two calls,
and every call it received is on a receipt and in the key's day, at its price, and nothing else
is. The provider's own count (`StubSearxServer.requests`) is the truth the figures are held to.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal
from unittest import mock

import pytest

from fanfuse.platforms import Registry
from fanfuse.platforms.searxng import SearxngPlatform
from fanfuse.queue.port import AggregateMessage, PlatformMessage
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.ports import TaskStore
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.cost import Price
from fanfuse.wire.errors import BudgetSpent, StartTooSlow, TaskConflict
from fanfuse.wire.models import Caller, PlatformState, TaskStatus, utcnow
from tests.support.budget_checks import spent

PLATFORM = "paid"
PRICE_USD = 1.0
DAILY_USD = 1.0
ANSWER_S = 1.5
BEHAVIOUR = f"delay/{ANSWER_S:g}"
CYCLES = 20
LANES = 4
"""The cycles run in four lanes at once: starts, cancels and deadlines of different searches
interleave, against one key's day (a lane whose start is refused tries again a moment later:
`admitted`)."""
CANCEL_AFTER: tuple[float | None, ...] = (0.0, 0.05, 0.3, 0.8, 1.2, 1.7, None)
"""Seconds from the 202 to the cancel: before the worker claimed the run, while it connects,
mid-call (the issue's 0.3 s), and after the answer (the cancel then finds the search over);
None: once the provider has received the search's request, whatever the machine's load, so
that some cancel always lands mid-call."""
REACH_S = 30.0
"""How long a mid-call cancel waits for the request to reach the provider (a refused hold, or a
run cut before it called, never reaches it: the cancel then goes anyway)."""
RETRY_S = 0.25
"""A refused lane's pause before its next start (429: the budget is spent, or held; 503: the
store was too slow to leave the search its time)."""
TIMEOUTS_S: tuple[float, ...] = (1.4, 2.0, 2.5, 4.0, 7.0)
"""Each search's `timeout_s`, by turn. The deadline cuts the 1.5 s call (whose answer comes
1.5 s after it reached the provider) when the workers reached the provider less than that
before it: on a quiet machine 1.4 s cuts every call; on a busy machine's emulator, where
claiming a run took over 1.4 s and no search of 1.4 s reached the provider at all, the longer
turns still cut calls or let them finish, so the scenario always pays the provider something to
count. A start's writes may take up to half of its deadline before the start is refused as too
slow (503), which a lane retries."""
KEY = Caller(
    subject="key:ledger",
    via="api_key",
    key_id="k1",
    rate_per_minute=10_000,
    max_in_flight=100,
    daily_budget_usd=DAILY_USD,
)
AMPLE = KEY.model_copy(update={"key_id": "k100", "daily_budget_usd": 100.0})
"""The same owner's key with a budget no scenario reaches: every start is admitted, so every
cycle's interleaving happens and the provider is paid many times, each call to be counted."""


def ledger_settings(base: Settings) -> Settings:
    """`base` (the store's settings) with the $1 price and a lease of a second, so a dead
    worker's run is taken over at once."""
    return base.model_copy(
        update={
            "progress_interval": 0.0,
            "deadline_seconds": 30,
            "lease_seconds": 1.0,
            "prices": {PLATFORM: Price(per_request_usd=PRICE_USD)},
        }
    )


def paid_registry(base_url: str) -> Registry:
    """The $1 platform: the stub's 1.5 s answer, no retries."""
    return Registry.of(
        [SearxngPlatform(name=PLATFORM, overrides={"base_url": base_url, "max_attempts": 1})]
    )


def body(query: str, **more: object) -> dict[str, object]:
    return {"query": query, "platform": PLATFORM, "max_results": 1, **more}


@dataclass
class Figures:
    """What a scenario did: searches started and refused, what the provider was asked (each
    request is a paid call), and what the receipts and the key's day recorded."""

    cycles: int
    started: int
    refused: int
    paid: int
    receipt_calls: int
    receipt_usd: float
    day_usd: float

    def __str__(self) -> str:
        return (
            f"{self.cycles} cycles: {self.started} started, {self.refused} refused; "
            f"{self.paid} paid calls at the provider; receipts {self.receipt_calls} calls "
            f"${self.receipt_usd:.2f}; the key's day ${self.day_usd:.2f}"
        )

    def check(self, most: int | None = 2) -> None:
        """At most `most` paid calls (one past the $1 budget), and every paid call counted,
        once, at its price."""
        assert most is None or self.paid <= most, str(self)
        assert self.receipt_calls == self.paid, str(self)
        assert abs(self.receipt_usd - self.paid * PRICE_USD) < 1e-6, str(self)
        assert abs(self.day_usd - self.paid * PRICE_USD) < 1e-6, str(self)


def figures(
    store: TaskStore,
    stub: StubSearxServer,
    task_ids: Iterable[str],
    cycles: int,
    refused: int,
    key: Caller = KEY,
) -> Figures:
    """The figures once every delivery has ended, read from `store` (another instance)."""
    tasks = [store.get_task(t) for t in task_ids]
    assert all(t is not None and t.status.terminal for t in tasks), "a search is not over"
    receipts = [t.cost for t in tasks if t is not None]
    day = min((t.created_at for t in tasks if t is not None), default=datetime.now(UTC))
    return Figures(
        cycles=cycles,
        started=len(receipts),
        refused=refused,
        paid=stub.requests[BEHAVIOUR],
        receipt_calls=sum(p.calls for c in receipts for p in c.platforms.values()),
        receipt_usd=sum(c.total_usd for c in receipts),
        day_usd=spent(store, key.subject, day, key.key_id),
    )


@dataclass
class Cycles:
    started: list[str]
    refused: int = 0


TURN_TRIES = 40
"""How often a turn's refused start is tried again (RETRY_S apart, ten seconds in all) while
the provider has been paid nothing."""


async def admitted(
    rt: EmbeddedRuntime,
    key: Caller,
    payload: dict[str, object],
    reached: Callable[[], int],
    done: Cycles,
) -> str | None:
    """The search of `payload` started (its task id), or None when its turn is skipped.

    A refused start (429: the budget is spent, or held by a search still under way; 503: the
    store was too slow to leave the search its time) wrote nothing. While the provider has
    been paid nothing, the budget was only held, by a search about to be cancelled or cut:
    the turn is tried again, so that some search reaches the provider whatever the machine's
    load (on a busy one, every search that won the budget was once cancelled before its call,
    and the figures held no paid call). Once the provider has been paid, the turn is skipped:
    the budget is spent.
    """
    for _ in range(TURN_TRIES):
        try:
            return rt.service.start(payload, caller=key).task_id
        except (BudgetSpent, StartTooSlow):
            done.refused += 1
            await asyncio.sleep(RETRY_S)
            if reached() > 0:
                return None
    return None


async def start_cancel_cycles(
    rt: EmbeddedRuntime, key: Caller, reached: Callable[[], int], cycles: int = CYCLES
) -> Cycles:
    """`cycles` start-cancel cycles in LANES lanes at once; each cancels after its turn of
    CANCEL_AFTER (a cancel that finds the search over is what a client would get: 409), a turn
    of None once `reached()` (the provider's count of requests) has grown."""
    done = Cycles(started=[])

    async def pause(after: float | None, before: int) -> None:
        if after is not None:
            await asyncio.sleep(after)
            return
        for _ in range(int(REACH_S / 0.02)):
            if reached() > before:
                return
            await asyncio.sleep(0.02)

    async def lane(lane_no: int) -> None:
        for i in range(lane_no, cycles, LANES):
            before = reached()
            task_id = await admitted(rt, key, body(f"ledger cancel {i}"), reached, done)
            if task_id is None:
                continue
            done.started.append(task_id)
            await pause(CANCEL_AFTER[i % len(CANCEL_AFTER)], before)
            with contextlib.suppress(TaskConflict):  # over already: what a client gets
                rt.service.cancel(task_id)

    await asyncio.gather(*(lane(n) for n in range(LANES)))
    return done


async def timeout_searches(
    rt: EmbeddedRuntime, key: Caller, reached: Callable[[], int], searches: int = CYCLES
) -> Cycles:
    """`searches` searches, each with its turn of TIMEOUTS_S, in LANES lanes at once, each
    waited for."""
    done = Cycles(started=[])

    async def lane(lane_no: int) -> None:
        for i in range(lane_no, searches, LANES):
            deadline = TIMEOUTS_S[i % len(TIMEOUTS_S)]
            payload = body(f"ledger timeout {i}", timeout_s=deadline)
            task_id = await admitted(rt, key, payload, reached, done)
            if task_id is None:
                continue
            done.started.append(task_id)
            view = await rt.wait(task_id, poll=0.05)
            assert view.status in (TaskStatus.FAILED, TaskStatus.COMPLETED), view.status

    await asyncio.gather(*(lane(n) for n in range(LANES)))
    return done


Scenario = Literal["cancel", "timeout"]


async def run_scenario(
    scenario: Scenario,
    settings: Settings,
    stub: StubSearxServer,
    store: TaskStore,
    reader: Callable[[], TaskStore],
    key: Caller = KEY,
) -> Figures:
    """One scenario of `key`'s on the embedded runtime over `store` (closed with it); the
    figures are read once every delivery has ended (the runtime drained its queue), through
    `reader`."""
    registry = paid_registry(stub.url(BEHAVIOUR))
    async with EmbeddedRuntime(settings, registry=registry, store=store) as rt:

        def reached() -> int:
            return stub.requests[BEHAVIOUR]

        if scenario == "cancel":
            done = await start_cancel_cycles(rt, key, reached)
        else:
            done = await timeout_searches(rt, key, reached)
        await settled(rt, done.started)
    other = reader()
    try:
        return figures(other, stub, done.started, CYCLES, done.refused, key)
    finally:
        other.close()


async def eventually(check: Callable[[], bool], what: str, at_most: float = 60.0) -> None:
    """Until `check()` holds, looked at every 20 ms for at most `at_most` seconds."""
    for _ in range(int(at_most / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{what}: not after {at_most:g} s")


async def settled(rt: EmbeddedRuntime, task_ids: list[str], at_most: float = 30.0) -> None:
    """Until no platform run of `task_ids` still holds a call nobody settled: every worker
    (each call is 1.5 s at most) has ended, and its late settlement landed."""

    def done() -> bool:
        runs = [r for t in task_ids for r in rt.service.store.get_runs(t)]
        return all(r.state.terminal and not r.held_calls for r in runs)

    await eventually(done, "calls still held", at_most)


# -- a worker killed mid-call ------------------------------------------------------------------

StoreKind = Literal["sqlite", "firestore", "dynamodb"]


@dataclass(frozen=True)
class StoreSpec:
    """How another process opens the same store."""

    kind: StoreKind
    settings: Settings
    firestore_host: str = ""
    firestore_project: str = ""


def open_store(spec: StoreSpec) -> TaskStore:
    if spec.kind == "sqlite":
        from fanfuse.store.sqlite import SqliteStore

        return SqliteStore(spec.settings.db_path)
    if spec.kind == "firestore":
        from google.cloud import firestore

        from fanfuse.store.firestore import FirestoreStore

        with mock.patch.dict(os.environ, {"FIRESTORE_EMULATOR_HOST": spec.firestore_host}):
            return FirestoreStore(firestore.Client(project=spec.firestore_project))
    from fanfuse.net.aws_clients import dynamodb_client
    from fanfuse.store.dynamodb import DynamoStore

    return DynamoStore(dynamodb_client(spec.settings), spec.settings.dynamodb_table)


def work_in_child(spec: StoreSpec, base_url: str, task_id: str) -> None:
    """A worker process: runs the search's platform, until it is killed."""
    from fanfuse.queue.port import PlatformMessage
    from tests.support.fakes import HeldQueue

    store = open_store(spec)
    service = SearchService(store, HeldQueue(), paid_registry(base_url), spec.settings)
    asyncio.run(service.run_platform(PlatformMessage(task_id=task_id, platform=PLATFORM)))


@dataclass
class Killed:
    figures: Figures
    held_while_running: int
    counted_while_running: float
    takeover: str
    duplicate: str


async def kill_mid_call(spec: StoreSpec, stub: StubSearxServer) -> Killed:
    """Start a search of the $1 key; a worker process claims its platform and is killed
    (SIGKILL) while its call waits for the provider's answer; once its lease lapses another
    delivery takes the run over, the search is finalized, and a duplicate delivery comes."""
    import multiprocessing

    from tests.support.fakes import HeldQueue

    store = open_store(spec)
    registry = paid_registry(stub.url(BEHAVIOUR))
    service = SearchService(store, HeldQueue(), registry, spec.settings)
    task_id = service.start(body("ledger killed"), caller=KEY).task_id
    spawn = multiprocessing.get_context("spawn")
    child = spawn.Process(target=work_in_child, args=(spec, stub.url(BEHAVIOUR), task_id))
    child.start()
    try:

        def called() -> bool:
            return stub.requests[BEHAVIOUR] >= 1 or not child.is_alive()

        await eventually(called, "the worker's call")
        assert stub.requests[BEHAVIOUR] == 1, "the worker did not call the provider"
    finally:
        os.kill(child.pid or 0, signal.SIGKILL)
        child.join(30)
    [run] = store.get_runs(task_id)
    assert run.state is PlatformState.RUNNING and run.lease_until is not None
    held, counted = len(run.held_calls), service.status(task_id).cost.total_usd
    lapse = (run.lease_until - utcnow()).total_seconds()  # the dead worker's lease (1 s)
    await asyncio.sleep(max(lapse, 0.0) + 0.05)
    message = PlatformMessage(task_id=task_id, platform=PLATFORM)
    takeover = await service.run_platform(message)
    await service.aggregate(AggregateMessage(task_id=task_id))
    duplicate = await service.run_platform(message)
    await asyncio.sleep(ANSWER_S)  # nothing else reaches the provider meanwhile
    try:
        found = figures(store, stub, [task_id], 1, 0)
    finally:
        store.close()
    return Killed(found, held, counted, takeover, duplicate)


# -- the contract ------------------------------------------------------------------------------


@dataclass
class LedgerHarness:
    """A store's part: where it is (`spec`, for another process too), the provider's stub."""

    spec: StoreSpec
    stub: StubSearxServer

    def open(self) -> TaskStore:
        return open_store(self.spec)


class SpendLedgerContract:
    """What every store's spend ledger does; `ledger` comes from the store's test module."""

    @pytest.fixture
    def ledger(self) -> LedgerHarness:
        raise NotImplementedError("a store's test class provides the harness")

    @pytest.mark.timeout(240)
    @pytest.mark.parametrize("scenario", ["cancel", "timeout"])
    async def test_cancels_and_deadlines_pay_for_at_most_two_calls_all_counted(
        self, scenario: Scenario, ledger: LedgerHarness
    ) -> None:
        found = await run_scenario(
            scenario, ledger.spec.settings, ledger.stub, ledger.open(), ledger.open
        )
        print(f"{ledger.spec.kind} {scenario}: {found}")
        found.check()
        assert found.paid >= 1  # the provider was reached: the figures hold a paid call

    @pytest.mark.timeout(240)
    @pytest.mark.parametrize("scenario", ["cancel", "timeout"])
    async def test_under_an_ample_budget_every_paid_call_is_counted_once(
        self, scenario: Scenario, ledger: LedgerHarness
    ) -> None:
        """The same cycles with a budget they never reach: all twenty start, so each cancel
        lands where its turn says (before the claim, while connecting, mid-call, after the
        answer) and each deadline cuts its call or lets it finish; whatever the provider was
        paid is what the receipts and the key's day say."""
        found = await run_scenario(
            scenario, ledger.spec.settings, ledger.stub, ledger.open(), ledger.open, AMPLE
        )
        print(f"{ledger.spec.kind} {scenario}, ample budget: {found}")
        found.check(most=None)
        # Non-vacuous: searches ran and the provider was paid (how many depends on the
        # machine's load: each cancel's turn lands before or after the call leaves).
        assert found.started >= CYCLES // 2 and found.paid >= 1, str(found)

    @pytest.mark.timeout(240)
    async def test_a_worker_killed_mid_call_counts_its_call_once(
        self, ledger: LedgerHarness
    ) -> None:
        killed = await kill_mid_call(ledger.spec, ledger.stub)
        print(f"{ledger.spec.kind} killed: {killed.figures}")
        # Counted before it was sent: on the document while the dead worker's lease ran.
        assert killed.held_while_running == 1 and killed.counted_while_running == PRICE_USD
        assert killed.takeover == "failed"  # its share of the money is the dead worker's call
        assert killed.duplicate == "skipped"
        killed.figures.check()
        assert killed.figures.paid == 1


@pytest.fixture
def stub() -> Iterator[StubSearxServer]:
    """The $1 provider, for the stores' modules that have no stack of their own."""
    with StubSearxServer() as server:
        yield server
