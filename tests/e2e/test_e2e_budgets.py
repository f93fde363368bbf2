"""A key's daily budget on the Firestore emulator: 20 concurrent starts from two instances (two
clients, as two start_search instances would be) against one key with a budget of five
one-cent searches; exactly five start, the others get 429 with nothing written, and the day's
document holds five cents. (The store's part, the reservations alone, is in the store contract,
tests/support/store_contract.py, which runs here too.)"""

from __future__ import annotations

from functools import partial

import pytest

from fanfuse.platforms import Registry
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.firestore import FirestoreStore
from fanfuse.wire.cost import Price
from fanfuse.wire.errors import BudgetSpent
from fanfuse.wire.models import Caller
from tests.support.budget_checks import DAILY_USD, NOON, SEARCH_USD, SEARCHES, spent, together
from tests.support.e2e.cloud import Cloud
from tests.support.fakes import Clock, FakePlatform, HeldQueue

KEY = Caller(
    subject="key:team", via="api_key", key_id="k1", max_in_flight=100, daily_budget_usd=DAILY_USD
)


def test_a_keys_daily_budget_holds_under_20_concurrent_searches(e2e: Cloud) -> None:
    settings = Settings(prices={"paid": Price(per_request_usd=SEARCH_USD)})
    registry = Registry.of([FakePlatform("paid")])
    stores = [FirestoreStore(e2e.firestore_client()) for _ in range(2)]
    services = [
        SearchService(store, HeldQueue(), registry, settings, clock=Clock(NOON)) for store in stores
    ]
    started: list[str] = []

    def start(i: int) -> bool:
        try:
            accepted = services[i % 2].start(
                {"query": "q", "platform": "paid", "max_results": 1}, caller=KEY
            )
        except BudgetSpent as exc:
            assert exc.status_code == 429 and exc.retry_after_s == 12 * 3600  # to the day's end
            return False
        started.append(accepted.task_id)
        return True

    assert together([partial(start, i) for i in range(SEARCHES)]) == 5
    assert spent(e2e.store, KEY.subject, key_id=KEY.key_id) == pytest.approx(DAILY_USD)
    tasks = list(e2e.db.collection("searches").stream())
    assert sorted(t.id for t in tasks) == sorted(started)  # a refused start wrote nothing
    for store in stores:
        store.close()
