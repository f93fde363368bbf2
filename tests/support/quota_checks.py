"""What the quota store tests share across stores (SQLite in tests/unit, Firestore in tests/e2e):
a search owned by someone, and many threads taking from one caller's bucket at once."""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from fanfuse.rules.quota import Limit
from fanfuse.service import admission
from fanfuse.store.ports import QuotaStore, TaskDocuments
from tests.support.fakes import pending_task

T0 = datetime(2026, 1, 1, tzinfo=UTC)
THREADS = 8
ATTEMPTS = 25


def owned_task(store: TaskDocuments, owner: str, now: datetime, *, deadline_s: float) -> str:
    """Write a pending search of `owner`'s with its deadline `deadline_s` after `now`."""
    task_id = uuid.uuid4().hex
    task = pending_task(task_id, owner, now, deadline_s=deadline_s)
    store.create(task, [])
    return task_id


def hammer(stores: Sequence[QuotaStore], subject: str, limit: Limit) -> int:
    """THREADS threads, thread i on `stores[i % len(stores)]`, each taking ATTEMPTS times at
    the same instant T0 (so nothing refills): how many takes were admitted in all."""
    admitted: list[int] = []
    gate = threading.Barrier(THREADS)

    def work(i: int) -> None:
        rng = random.Random(i)
        store = stores[i % len(stores)]
        gate.wait()
        ok = [admission.take(store, subject, limit, T0, rng) is None for _ in range(ATTEMPTS)]
        admitted.append(sum(ok))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(admitted) == THREADS, "a thread did not finish"
    return sum(admitted)
