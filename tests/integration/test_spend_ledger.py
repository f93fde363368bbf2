"""The spend ledger on SQLite (tests/support/spend_checks.py; issue 29, item 1): a $1-a-day key
and a $1-a-request platform answering in 1.5 s. Twenty start-cancel cycles and twenty searches ended
by `timeout_s` pay for at most two calls, and every paid call is on a receipt and in the key's
day; a worker killed mid-call (another process, SIGKILL) still counts its call, once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fanfuse.queue.port import AggregateMessage, PlatformMessage
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.models import PlatformState, TaskStatus
from tests.support.budget_checks import spent
from tests.support.fakes import HeldQueue
from tests.support.spend_checks import (
    KEY,
    PLATFORM,
    PRICE_USD,
    LedgerHarness,
    SpendLedgerContract,
    StoreSpec,
    body,
    eventually,
    ledger_settings,
    paid_registry,
    settled,
)
from tests.support.spend_checks import stub as stub

CUT_WITHIN_S = 10.0
"""A cut call's worker ends within this (at once, or at its next renewal, every 1/3 s), where
an uncut one would wait for its call's own timeout (20 s, the platform's default)."""


class TestSqliteSpendLedger(SpendLedgerContract):
    @pytest.fixture
    def ledger(self, tmp_path: Path, stub: StubSearxServer) -> LedgerHarness:
        settings = ledger_settings(Settings(db_path=tmp_path / "fanfuse.db"))
        SqliteStore(settings.db_path).close()  # the schema, before two processes open it
        return LedgerHarness(StoreSpec("sqlite", settings), stub)


async def test_a_cancel_cuts_the_call_in_flight_in_this_process_and_counts_it(
    tmp_path: Path, stub: StubSearxServer
) -> None:
    """The provider holds its answer (a gate this test never opens, within the test's time) and
    the lease is long (no renewal comes in the test's time): the cancel itself ends the
    worker's call at once, and the cut call, which reached the provider, is on the receipt and
    in the day at its price."""
    settings = ledger_settings(Settings(db_path=tmp_path / "fanfuse.db"))
    settings = settings.model_copy(update={"lease_seconds": 300.0})
    registry = paid_registry(stub.url("gate/never"))
    async with EmbeddedRuntime(settings, registry=registry) as rt:
        accepted = rt.service.start(body("ledger cut"), caller=KEY)
        await eventually(lambda: stub.waiting("never") == 1, "the call at the provider")
        rt.service.cancel(accepted.task_id)
        # The worker ended, the gate still closed, well before the call's own 20 s timeout.
        await settled(rt, [accepted.task_id], at_most=CUT_WITHIN_S)
        view = rt.service.status(accepted.task_id)
        day = spent(rt.service.store, KEY.subject, view.created_at, KEY.key_id)
    [run] = view.platform_runs
    assert [(c.status, c.cost_usd) for c in run.calls] == [(None, PRICE_USD)]
    assert view.cost.total_usd == PRICE_USD and day == PRICE_USD


async def test_a_cancel_from_another_instance_cuts_the_call_at_the_next_lease_renewal(
    tmp_path: Path, stub: StubSearxServer
) -> None:
    """The cancel comes through another service on the same store (another function instance):
    the worker learns of it when its lease renewal is refused (a third of its 1 s lease) and
    cuts its call then, long before the provider's answer would come."""
    settings = ledger_settings(Settings(db_path=tmp_path / "fanfuse.db"))
    registry = paid_registry(stub.url("gate/never"))
    async with EmbeddedRuntime(settings, registry=registry) as rt:
        accepted = rt.service.start(body("ledger cut elsewhere"), caller=KEY)
        await eventually(lambda: stub.waiting("never") == 1, "the call at the provider")
        elsewhere = SqliteStore(settings.db_path)
        SearchService(elsewhere, HeldQueue(), registry, settings).cancel(accepted.task_id)
        elsewhere.close()
        await settled(rt, [accepted.task_id], at_most=CUT_WITHIN_S)
        view = rt.service.status(accepted.task_id)
    [run] = view.platform_runs
    assert [(c.status, c.cost_usd) for c in run.calls] == [(None, PRICE_USD)]
    assert view.cost.total_usd == PRICE_USD


async def test_a_worker_answering_after_its_search_was_finalized_settles_its_call(
    tmp_path: Path, stub: StubSearxServer
) -> None:
    """The deadline finalizes the search while its worker's call waits for the provider: the
    final receipt already counts the call (held), and when the answer comes the worker's record
    takes the hold's place on the document, receipt and day unchanged at the call's price."""
    settings = ledger_settings(Settings(db_path=tmp_path / "fanfuse.db"))
    store = SqliteStore(settings.db_path)
    service = SearchService(store, HeldQueue(), paid_registry(stub.url("gate/late")), settings)
    task_id = service.start(body("ledger late"), caller=KEY).task_id
    worker = asyncio.create_task(
        service.run_platform(PlatformMessage(task_id=task_id, platform=PLATFORM))
    )
    await eventually(lambda: stub.waiting("late") == 1, "the call at the provider")
    await service.aggregate(AggregateMessage(task_id=task_id, deadline=True))
    final = service.status(task_id)
    assert final.status is TaskStatus.FAILED and final.cost.total_usd == PRICE_USD
    [run] = final.platform_runs
    assert run.state is PlatformState.TIMED_OUT and len(run.held_calls) == 1 and run.calls == []
    stub.release("late")
    assert await asyncio.wait_for(worker, 30) == "discarded"
    view = service.status(task_id)
    [run] = view.platform_runs
    assert run.held_calls == [] and [(c.status, c.cost_usd) for c in run.calls] == [(200, 1.0)]
    assert view.cost.total_usd == PRICE_USD and view.status is TaskStatus.FAILED
    assert spent(store, KEY.subject, view.created_at, KEY.key_id) == PRICE_USD
    store.close()
