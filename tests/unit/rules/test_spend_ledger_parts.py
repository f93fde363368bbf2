"""The spend ledger's parts (rules/spend.py, net/holds.py, service/ledger.py): a priced call is
held on its run's document before it is sent, the receipt counts records and holds once each,
the cancel counts calls in flight, a late worker settles its holds, the runner calls the hold
before the send and prices a call that got no answer by whether its request left. The
acceptance across stores is tests/support/spend_checks.py."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.net.holds import Departure
from fanfuse.net.policy import CallPolicy
from fanfuse.net.runner import RequestSpec, Runner
from fanfuse.platforms import Registry
from fanfuse.rules import lifecycle, spend
from fanfuse.rules.mutations import Snapshot
from fanfuse.service.budgets import Budgets
from fanfuse.service.execute import abortable
from fanfuse.service.heartbeat import Heartbeat
from fanfuse.service.ledger import InFlight, settle_late
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.cost import Cost, PlatformCost, Price
from fanfuse.wire.errors import Cancelled, ProviderError
from fanfuse.wire.models import (
    Caller,
    CallRecord,
    HeldCall,
    PlatformRun,
    PlatformState,
    Task,
    TaskStatus,
    utcnow,
)
from tests.support.budget_checks import spent
from tests.support.fakes import FakePlatform, HeldQueue, make_task

LEASE = timedelta(seconds=30)


def held(hold_id: str, lease: str = "w1", usd: float = 1.0) -> HeldCall:
    return HeldCall(id=hold_id, usd=usd, lease=lease, at=utcnow())


def record(hold_id: str | None, cost: float, status: int | None = 200) -> CallRecord:
    return CallRecord(platform="paid", status=status, cost_usd=cost, hold=hold_id)


def claimed(*, held_calls: list[HeldCall] | None = None) -> tuple[Task, PlatformRun]:
    task, [run] = make_task("t1", ["paid"])
    snap = Snapshot(task=task, runs={"paid": run})
    writes = lifecycle.claim("paid", utcnow(), "w1", lease=LEASE)(snap)
    assert writes is not None
    return task, writes.runs[0].model_copy(update={"held_calls": held_calls or []})


def test_the_receipt_counts_records_and_unsettled_holds_once_each() -> None:
    _, run = claimed(held_calls=[held("a"), held("b", usd=0.5)])
    run = run.model_copy(update={"calls": [record("a", 0.75), record(None, 0.0, 400)]})
    cost = spend.receipt(Cost(platforms={"paid": PlatformCost(estimate_usd=2)}), [run])
    # `a` is answered (its record counts, not its hold); `b` is in flight (its hold counts).
    assert cost.platforms["paid"] == PlatformCost(calls=2, usd=1.25, estimate_usd=2)
    assert cost.total_usd == 1.25 and spend.committed(run) == 1.25


def test_a_hold_lands_only_on_the_running_run_of_its_lease() -> None:
    task, run = claimed()
    snap = Snapshot(task=task, runs={"paid": run})
    writes = spend.hold("paid", held("a"))(snap)
    assert writes is not None and [h.id for h in writes.runs[0].held_calls] == ["a"]
    again = Snapshot(task=task, runs={"paid": writes.runs[0]})
    twice = spend.hold("paid", held("a"))(again)  # a store may run the mutator again
    assert twice is not None and len(twice.runs[0].held_calls) == 1
    assert spend.hold("paid", held("c", lease="w2"))(snap) is None  # taken over
    ended = run.model_copy(update={"state": PlatformState.CANCELLED})
    assert spend.hold("paid", held("c"))(Snapshot(task=task, runs={"paid": ended})) is None
    over = task.model_copy(update={"status": TaskStatus.CANCELLED})
    assert spend.hold("paid", held("c"))(Snapshot(task=over, runs={"paid": run})) is None
    assert spend.hold("other", held("c"))(snap) is None


def test_the_finish_settles_the_holds_its_records_answer() -> None:
    task, run = claimed(held_calls=[held("a"), held("stale", lease="w0")])
    outcome = lifecycle.Outcome(state=PlatformState.SUCCEEDED, calls=[record("a", 1.0)])
    writes = lifecycle.finish("paid", outcome, utcnow(), "w1")(
        Snapshot(task=task, runs={"paid": run})
    )
    assert writes is not None
    [ended] = writes.runs
    assert [c.hold for c in ended.calls] == ["a"]
    assert [h.id for h in ended.held_calls] == ["stale"]  # a dead worker's stays counted
    assert spend.receipt(task.cost, [ended]).total_usd == 2.0


def test_a_cancel_counts_the_calls_still_in_flight() -> None:
    task, run = claimed(held_calls=[held("a")])
    writes = lifecycle.cancel(utcnow())(Snapshot(task=task, runs={"paid": run}))
    assert writes is not None and writes.task is not None
    assert writes.task.status is TaskStatus.CANCELLED
    assert writes.task.cost.total_usd == 1.0 and writes.task.cost.platforms["paid"].calls == 1


def test_a_late_worker_settles_its_holds_into_the_terminal_receipt_once() -> None:
    task, run = claimed(held_calls=[held("a"), held("b")])
    cancelled = lifecycle.cancel(utcnow())(Snapshot(task=task, runs={"paid": run}))
    assert cancelled is not None and cancelled.task is not None
    assert cancelled.task.cost.total_usd == 2.0
    snap = Snapshot(task=cancelled.task, runs={"paid": cancelled.runs[0]})
    calls = [record("a", 1.0), record("b", 0.0, 400), record(None, 0.0)]
    settle = spend.settle_late("paid", "w1", calls, utcnow())
    writes = settle(snap)
    assert writes is not None and writes.task is not None
    assert writes.task.status is TaskStatus.CANCELLED  # still the one terminal state
    assert writes.task.cost.total_usd == 1.0 and writes.task.cost.platforms["paid"].calls == 1
    [ended] = writes.runs
    assert ended.held_calls == [] and len(ended.calls) == 3
    assert settle(Snapshot(task=writes.task, runs={"paid": ended})) is None  # idempotent
    assert spend.settle_late("paid", "w9", calls, utcnow())(snap) is None  # not its holds


def test_a_late_settlement_before_the_search_ends_writes_the_run_alone() -> None:
    task, run = claimed(held_calls=[held("a")])
    writes = spend.settle_late("paid", "w1", [record("a", 1.0)], utcnow())(
        Snapshot(task=task, runs={"paid": run})
    )
    assert writes is not None and writes.task is None
    assert writes.runs[0].held_calls == [] and spend.committed(writes.runs[0]) == 1.0


# -- the runner's hook ---------------------------------------------------------------------------

SPEC = RequestSpec(url="https://provider.test/search")
POLICY = CallPolicy(timeout=5.0, max_attempts=2)


class Holds:
    """A CallHold that logs its calls (and the transport logs its requests to the same list)."""

    def __init__(self, log: list[str], refuse: bool = False) -> None:
        self.log, self.refuse = log, refuse

    def __call__(self) -> tuple[str, float]:
        self.log.append("hold")
        if self.refuse:
            raise Cancelled("the run was cancelled")
        return "h1", 1.5


async def test_a_priced_call_is_held_once_before_it_is_sent_and_priced_by_its_answer(
    server: HTTPServer, runner: Runner
) -> None:
    log: list[str] = []
    answers = iter([503, 200])

    def handler(request: Request) -> Response:
        log.append("send")
        return Response("{}", status=next(answers), content_type="application/json")

    server.expect_request("/search").respond_with_handler(handler)
    calls: list[CallRecord] = []
    spec = RequestSpec(url=server.url_for("/search"))
    await runner.request("paid", spec, POLICY, calls, price_usd=1.0, hold=Holds(log))
    assert log == ["hold", "send", "send"]  # once per call, its retries included
    assert [(c.hold, c.cost_usd, c.attempts) for c in calls] == [("h1", 1.0, 2)]


async def test_a_refused_hold_sends_nothing() -> None:
    log: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        log.append("send")
        return httpx.Response(200, json={})

    runner = Runner(transport=httpx.MockTransport(handler))
    calls: list[CallRecord] = []
    with pytest.raises(Cancelled):
        await runner.request("paid", SPEC, POLICY, calls, price_usd=1.0, hold=Holds(log, True))
    assert log == ["hold"]
    assert calls[0].hold is None and calls[0].cost_usd == 0
    assert (calls[0].error or "").startswith("not sent")


async def test_a_held_call_that_left_and_got_no_answer_counts_its_held_price(
    server: HTTPServer,
) -> None:
    """A real socket (httpcore's trace events): the request left, the answer never came in
    time; the provider may bill it, so its record carries the held price."""
    release = threading.Event()

    def slow(request: Request) -> Response:
        release.wait(5)
        return Response("{}", content_type="application/json")

    server.expect_request("/slow").respond_with_handler(slow)
    runner = Runner()
    calls: list[CallRecord] = []
    policy = CallPolicy(timeout=0.3, max_attempts=1)
    try:
        with pytest.raises(ProviderError, match="timed out"):
            spec = RequestSpec(url=server.url_for("/slow"))
            await runner.request("paid", spec, policy, calls, price_usd=1.0, hold=Holds([]))
    finally:
        release.set()
        await runner.aclose()
    assert [(c.hold, c.status, c.cost_usd) for c in calls] == [("h1", None, 1.5)]


async def test_a_held_call_cut_before_its_request_left_costs_nothing() -> None:
    """The transport reports it is still connecting when the call is cut (httpcore's trace
    event, as a connect that never completes would): nothing reached a provider."""

    async def connecting(request: httpx.Request) -> httpx.Response:
        trace = request.extensions["trace"]
        await trace("connection.connect_tcp.started", {})
        await asyncio.sleep(10)
        raise AssertionError("cut before")

    runner = Runner(transport=httpx.MockTransport(connecting))
    calls: list[CallRecord] = []
    policy = CallPolicy(timeout=0.05, max_attempts=1)
    with pytest.raises(ProviderError):
        await runner.request("paid", SPEC, policy, calls, price_usd=1.0, hold=Holds([]))
    assert [(c.hold, c.cost_usd) for c in calls] == [("h1", 0.0)]


async def test_a_held_call_cut_before_httpcore_wrote_anything_costs_nothing() -> None:
    """httpx's own transport with a kept-alive connection, and the deadline already past when
    the hold returns (a slow store): the call is cut at its first wait, before httpcore wrote
    or reported anything; the provider received nothing, and nothing is counted."""

    class SlowHold(Holds):
        def __call__(self) -> tuple[str, float]:
            time.sleep(0.2)  # the store's transaction, past the deadline below
            return super().__call__()

    runner = Runner()
    calls: list[CallRecord] = []
    with StubSearxServer() as stub:
        spec = RequestSpec(url=stub.url("delay/0") + "/search", params={"q": "first"})
        await runner.request("paid", spec, POLICY, [])  # the connection, kept alive
        spec = RequestSpec(url=stub.url("delay/0") + "/search", params={"q": "cut"})
        try:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):  # the search's deadline, as the executor's
                    await runner.request(
                        "paid", spec, POLICY, calls, price_usd=1.0, hold=SlowHold([])
                    )
        finally:
            await runner.aclose()
        assert stub.requests["delay/0"] == 1  # the first call only
    assert [(c.hold, c.status, c.cost_usd) for c in calls] == [("h1", None, 0.0)]


async def test_departure_reads_httpcore_trace_events() -> None:
    untold = Departure(tracing=False)
    assert untold.may_have_left  # a transport that tells nothing: counted as sent
    waiting = Departure(tracing=True)
    assert not waiting.may_have_left  # httpcore wrote nothing yet (waiting for a connection)
    for tracing in (False, True):
        connecting = Departure(tracing=tracing)
        await connecting.trace("connection.connect_tcp.started", {})
        assert not connecting.may_have_left
        sent = Departure(tracing=tracing)
        await sent.trace("connection.connect_tcp.complete", {})
        await sent.trace("http11.send_request_headers.started", {})
        assert sent.may_have_left


# -- cutting calls in flight ---------------------------------------------------------------------


async def test_abortable_cuts_its_work_when_the_abort_comes() -> None:
    abort = asyncio.Event()
    cut = asyncio.Event()

    async def call() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cut.set()
            raise
        return "answer"

    async def quick() -> str:
        return "answer"

    assert await abortable(quick(), abort) == "answer"
    assert await abortable(quick(), None) == "answer"
    asyncio.get_running_loop().call_later(0.05, abort.set)
    with pytest.raises(Cancelled):
        await abortable(call(), abort)
    assert cut.is_set()


async def test_a_cancel_aborts_this_processs_runs_of_its_search_only() -> None:
    in_flight = InFlight()
    mine, other = in_flight.enter("t1"), in_flight.enter("t2")
    # From another thread, as a front's worker thread cancels.
    threading.Thread(target=in_flight.abort, args=("t1",)).start()
    await asyncio.wait_for(mine.wait(), 5)
    assert not other.is_set()
    in_flight.leave("t1", mine)
    in_flight.abort("t1")  # nothing registered: nothing to do
    in_flight.leave("t2", other)
    assert not other.is_set()


# -- the lease renewal that raced a hold -----------------------------------------------------


class RacingStore(SqliteStore):
    """Every conditional progress write fails, as a Firestore or DynamoDB one does when another
    write of the run (a progress update, a call's hold) landed between its read and its write."""

    def patch_run(
        self, task_id: str, name: str, fields: dict[str, Any], *, lease: str | None
    ) -> bool:
        return False


async def test_a_renewal_that_raced_another_write_keeps_the_run_until_it_is_taken_over(
    tmp_path: Path,
) -> None:
    store = RacingStore(tmp_path / "f.db")
    task, runs = make_task("t1", ["paid"])
    store.create(task, runs)
    store.transact("t1", ["paid"], lifecycle.claim("paid", utcnow(), "w1", lease=LEASE))
    lost: list[bool] = []
    beat = Heartbeat(
        store, "t1", "paid", "w1", timedelta(seconds=0.3), utcnow, on_lost=lambda: lost.append(True)
    )
    async with beat:
        await asyncio.sleep(0.35)  # three renewals, each refused by a race: still its run
        assert not beat.lost and lost == []
        later = utcnow() + 2 * LEASE
        store.transact("t1", ["paid"], lifecycle.claim("paid", later, "w2", lease=LEASE))
        for _ in range(50):  # bounded: until the next renewal finds the run taken over
            if beat.lost:
                break
            await asyncio.sleep(0.02)
    assert beat.lost and lost == [True]
    store.close()


# -- a late settlement moves the key's day ---------------------------------------------------


def test_a_late_answer_cheaper_than_its_hold_gives_the_difference_back_to_the_day(
    tmp_path: Path,
) -> None:
    """A call held at its dearest ($1.50) is in flight when its search is cancelled: the day
    keeps the $1.50; its answer then settles at $1 (fewer results than the dearest), and the
    receipt and the key's day follow: $1 both."""
    prices = {"paid": Price(per_request_usd=1.5)}
    settings = Settings(db_path=tmp_path / "f.db").model_copy(update={"prices": prices})
    store = SqliteStore(settings.db_path)
    registry = Registry.of([FakePlatform("paid")])
    service = SearchService(store, HeldQueue(), registry, settings)
    key = Caller(subject="key:team", via="api_key", key_id="k1", daily_budget_usd=5.0)
    task_id = service.start(
        {"query": "q", "platform": "paid", "max_results": 1}, caller=key
    ).task_id
    store.transact(task_id, ["paid"], lifecycle.claim("paid", utcnow(), "w1", lease=LEASE))
    store.transact(task_id, ["paid"], spend.hold("paid", held("h1", usd=1.5)))
    service.cancel(task_id)
    day = utcnow()
    assert spent(store, key.subject, day, "k1") == pytest.approx(1.5)
    budgets = Budgets(store, registry, settings)
    settle_late(store, budgets, task_id, "paid", "w1", [record("h1", 1.0)], utcnow())
    assert service.status(task_id).cost.total_usd == pytest.approx(1.0)
    assert spent(store, key.subject, day, "k1") == pytest.approx(1.0)
    store.close()
