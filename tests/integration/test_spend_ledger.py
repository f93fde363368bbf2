"""The spend ledger on SQLite (tests/spend_checks.py; issue 29, item 1): a $1-a-day key and a
$1-a-request platform answering in 1.5 s. Twenty start-cancel cycles and twenty searches ended
by `timeout_s` pay for at most two calls, and every paid call is on a receipt and in the key's
day; a worker killed mid-call (another process, SIGKILL) still counts its call, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tools.stubs import StubSearxServer
from tests.budget_checks import spent
from tests.spend_checks import (
    KEY,
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
from tests.spend_checks import stub as stub


class TestSqliteSpendLedger(SpendLedgerContract):
    @pytest.fixture
    def ledger(self, tmp_path: Path, stub: StubSearxServer) -> LedgerHarness:
        settings = ledger_settings(Settings(db_path=tmp_path / "fanfuse.db"))
        SqliteStore(settings.db_path).close()  # the schema, before two processes open it
        return LedgerHarness(StoreSpec("sqlite", settings), stub)


async def test_a_cancel_cuts_the_call_in_flight_in_this_process_and_counts_it(
    tmp_path: Path, stub: StubSearxServer
) -> None:
    """The provider holds its answer (a gate this test never opens, within the test's time):
    the cancel ends the worker's call at once instead of when the answer would come, and the
    cut call, which reached the provider, is on the receipt and in the day at its price."""
    settings = ledger_settings(Settings(db_path=tmp_path / "fanfuse.db"))
    registry = paid_registry(stub.url("gate/never"))
    async with EmbeddedRuntime(settings, registry=registry) as rt:
        accepted = rt.service.start(body("ledger cut"), caller=KEY)
        await eventually(lambda: stub.waiting("never") == 1, "the call at the provider")
        rt.service.cancel(accepted.task_id)
        await settled(rt, [accepted.task_id])  # the worker ended: the gate is still closed
        view = rt.service.status(accepted.task_id)
        day = spent(rt.service.store, KEY.subject, view.created_at, KEY.key_id)
    [run] = view.platform_runs
    assert [(c.status, c.cost_usd) for c in run.calls] == [(None, PRICE_USD)]
    assert view.cost.total_usd == PRICE_USD and day == PRICE_USD
