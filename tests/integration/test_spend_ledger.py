"""The spend ledger on SQLite (tests/spend_checks.py; issue 29, item 1): a $1-a-day key and a
$1-a-request platform answering in 1.5 s. Twenty start-cancel cycles and twenty searches ended
by `timeout_s` pay for at most two calls, and every paid call is on a receipt and in the key's
day; a worker killed mid-call (another process, SIGKILL) still counts its call, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tools.stubs import StubSearxServer
from tests.spend_checks import LedgerHarness, SpendLedgerContract, StoreSpec, ledger_settings
from tests.spend_checks import stub as stub


class TestSqliteSpendLedger(SpendLedgerContract):
    @pytest.fixture
    def ledger(self, tmp_path: Path, stub: StubSearxServer) -> LedgerHarness:
        settings = ledger_settings(Settings(db_path=tmp_path / "fanfuse.db"))
        SqliteStore(settings.db_path).close()  # the schema, before two processes open it
        return LedgerHarness(StoreSpec("sqlite", settings), stub)
