"""The SQLite store's quota methods: the take is one BEGIN IMMEDIATE transaction, so threads on
one connection never admit more than the bucket holds. (Separate connections, standing for
processes, and the in-flight count: tests/support/store_contract.py, run for every store.)"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from fanfuse.rules.quota import Limit
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.models import QuotaBucket
from tests.support.quota_checks import T0, hammer


def test_concurrent_takes_on_one_connection_admit_exactly_the_burst(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "q.db")
    assert hammer([store], "dave", Limit.per_minute(30)) == 30  # 200 attempts, one shard of 30


def test_a_refused_take_writes_nothing_and_expired_buckets_are_purged(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "q.db")
    empty = QuotaBucket(tokens=0, updated_at=T0, expires_at=T0 + timedelta(seconds=60))
    store.take_quota("erin#0", lambda _: (empty, None))
    seen: list[QuotaBucket | None] = []

    def refuse(bucket: QuotaBucket | None) -> tuple[QuotaBucket | None, float | None]:
        seen.append(bucket)
        return None, 2.0

    assert store.take_quota("erin#0", refuse) == 2.0
    assert seen == [empty]
    assert store.take_quota("erin#0", lambda b: (None, None if b == empty else 1.0)) is None
    store.purge_expired(T0 + timedelta(seconds=59))
    assert store.take_quota("erin#0", lambda b: (None, None if b is None else 1.0)) == 1.0
    store.purge_expired(T0 + timedelta(seconds=60))
    assert store.take_quota("erin#0", lambda b: (None, None if b is None else 1.0)) is None


def test_in_flight_counts_on_the_owner_index(tmp_path: Path) -> None:
    """What it counts: tests/support/store_contract.py; here, that it reads the expression index."""
    store = SqliteStore(tmp_path / "q.db")
    plan = store._db.execute(
        "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM tasks WHERE json_extract(doc, '$.owner') = ?",
        ("frank",),
    ).fetchall()
    assert "tasks_owner" in str(plan)  # the expression index, not a scan of every task
