"""The spend ledger on DynamoDB (moto's server; tests/support/spend_checks.py, issue 29 item 1): a
$1-a-day key and a $1-a-request platform answering in 1.5 s. Twenty start-cancel cycles and
twenty searches ended by `timeout_s` pay for at most two calls, every paid call on a receipt and
in the key's day; a worker killed mid-call (another process, SIGKILL) counts its call once."""

from __future__ import annotations

import pytest

from fanfuse.settings import Settings
from fanfuse.tools.stubs import StubSearxServer
from tests.support.spend_checks import (
    LedgerHarness,
    SpendLedgerContract,
    StoreSpec,
    ledger_settings,
)
from tests.support.spend_checks import stub as stub


class TestDynamoSpendLedger(SpendLedgerContract):
    @pytest.fixture
    def ledger(self, aws_settings: Settings, stub: StubSearxServer) -> LedgerHarness:
        return LedgerHarness(StoreSpec("dynamodb", ledger_settings(aws_settings)), stub)
