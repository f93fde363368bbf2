"""What the daily-budget tests share across stores and processes: reservations taken at once
against one key's day (the store contract: SQLite, Firestore emulator, DynamoDB on moto), and a
process's concurrent starts against one SQLite file (tests/integration/test_budgets.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from multiprocessing.queues import Queue
from pathlib import Path

from fanfuse.rules import budget
from fanfuse.store.ports import QuotaStore
from fanfuse.wire.errors import BudgetSpent
from fanfuse.wire.models import QuotaBucket

NOON = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
SEARCHES = 20
DAILY_USD = 0.05
SEARCH_USD = 0.01
"""Twenty searches of a cent each against a budget of five cents: exactly five fit."""


def together(calls: Sequence[Callable[[], bool]]) -> int:
    """Run `calls` in threads released together; how many returned True."""
    gate = threading.Barrier(len(calls))
    done: list[bool] = []
    lock = threading.Lock()

    def run(call: Callable[[], bool]) -> None:
        gate.wait(30)
        ok = call()
        with lock:
            done.append(ok)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(done) == len(calls), "a thread did not finish"
    return sum(done)


def reserve_concurrently(stores: Sequence[QuotaStore], subject: str) -> int:
    """SEARCHES reservations of SEARCH_USD at once, spread over `stores`: how many fit."""

    def one(i: int) -> Callable[[], bool]:
        store = stores[i % len(stores)]
        key = budget.day_key(subject, NOON)
        return lambda: store.take_quota(key, budget.reserve(SEARCH_USD, DAILY_USD, NOON)) is None

    return together([one(i) for i in range(SEARCHES)])


def spent(
    store: QuotaStore, subject: str, day: datetime = NOON, key_id: str | None = None
) -> float:
    """`day`'s spend of `subject`'s key `key_id` as stored (a read through the same
    one-document step, writing nothing)."""
    seen: list[float] = []

    def read(bucket: QuotaBucket | None) -> tuple[QuotaBucket | None, float | None]:
        seen.append(bucket.tokens if bucket is not None else 0.0)
        return None, 0.0

    store.take_quota(budget.day_key(subject, day, key_id), read)
    return seen[-1]


def start_in_process(db: Path, threads: int, results: Queue[tuple[int, int]]) -> None:
    """One process's share of the two-process test: `threads` concurrent starts by one key
    with a daily budget, on a fresh service over the SQLite file `db`; puts (admitted,
    refused with 429) on the `results` queue."""
    from fanfuse.platforms import Registry
    from fanfuse.service.service import SearchService
    from fanfuse.settings import Settings
    from fanfuse.store.sqlite import SqliteStore
    from fanfuse.wire.cost import Price
    from fanfuse.wire.models import Caller
    from tests.support.fakes import Clock, FakePlatform, HeldQueue

    settings = Settings(db_path=db, prices={"paid": Price(per_request_usd=SEARCH_USD)})
    store = SqliteStore(db)
    registry = Registry.of([FakePlatform("paid")])
    service = SearchService(store, HeldQueue(), registry, settings, clock=Clock(NOON))
    caller = Caller(
        subject="key:team",
        via="api_key",
        key_id="k1",
        max_in_flight=100,
        daily_budget_usd=DAILY_USD,
    )
    refused: list[int] = []

    def start() -> bool:
        try:
            service.start({"query": "q", "platform": "paid", "max_results": 1}, caller=caller)
        except BudgetSpent:
            refused.append(1)
            return False
        return True

    admitted = together([start for _ in range(threads)])
    store.close()
    results.put((admitted, len(refused)))
