"""The SQLite store's quota methods: the take is one BEGIN IMMEDIATE transaction, so threads and
separate connections (processes) never admit more than the bucket holds; the in-flight count
sees only the owner's live searches. (tests/e2e/test_e2e_firestore_store.py: the same on
Firestore.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from fanfuse import lifecycle
from fanfuse.models import QuotaBucket
from fanfuse.quota import Limit
from fanfuse.store.sqlite import SqliteStore
from tests.quota_checks import T0, hammer, owned_task


def test_concurrent_takes_on_one_connection_admit_exactly_the_burst(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "q.db")
    assert hammer([store], "dave", Limit.per_minute(30)) == 30  # 200 attempts, one shard of 30


def test_concurrent_takes_on_separate_connections_never_exceed_the_burst(tmp_path: Path) -> None:
    """Separate connections stand for separate processes: only SQLite's lock orders them."""
    stores = [SqliteStore(tmp_path / "q.db") for _ in range(4)]
    assert hammer(stores, "dave", Limit.per_minute(30)) == 30
    sharded = Limit.per_minute(120)  # 4 shards of 30
    admitted = hammer(stores, "erin", sharded)
    assert sharded.burst - 4 <= admitted <= sharded.burst  # bounded tries may leave a few


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


def test_in_flight_counts_the_owners_live_searches_only(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "q.db")
    now = datetime.now(UTC)
    live = [owned_task(store, "frank", now, deadline_s=60) for _ in range(3)]
    owned_task(store, "grace", now, deadline_s=60)
    owned_task(store, "frank", now, deadline_s=1)  # past its deadline 2 s from now
    assert store.count_in_flight("frank", now) == 4
    assert store.count_in_flight("frank", now + timedelta(seconds=2)) == 3
    store.transact(live[0], None, lifecycle.cancel(now))
    assert store.count_in_flight("frank", now) == 3
    assert store.count_in_flight("nobody", now) == 0
    plan = store._db.execute(
        "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM tasks WHERE json_extract(doc, '$.owner') = ?",
        ("frank",),
    ).fetchall()
    assert "tasks_owner" in str(plan)  # the expression index, not a scan of every task
