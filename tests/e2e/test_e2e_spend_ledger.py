"""The spend ledger on the Firestore emulator (tests/support/spend_checks.py, issue 29 item 1): a
$1-a-day key and a $1-a-request platform answering in 1.5 s (the stack's stub SearXNG). Twenty
start-cancel cycles and twenty searches ended by `timeout_s` pay for at most two calls, every
paid call on a receipt and in the key's day; a worker killed mid-call (another process, SIGKILL)
counts its call once. The service runs here, on the emulator, as a worker instance would."""

from __future__ import annotations

import pytest

from fanfuse.settings import Settings
from tests.support.e2e.cloud import Cloud
from tests.support.spend_checks import (
    LedgerHarness,
    SpendLedgerContract,
    StoreSpec,
    ledger_settings,
)


class TestFirestoreSpendLedger(SpendLedgerContract):
    @pytest.fixture
    def ledger(self, e2e: Cloud) -> LedgerHarness:
        spec = StoreSpec(
            "firestore",
            ledger_settings(Settings()),
            firestore_host=e2e.addresses.firestore,
            firestore_project=e2e.addresses.project,
        )
        return LedgerHarness(spec, e2e.stub)
