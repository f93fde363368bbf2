"""FirestoreStore on the Firestore emulator: the TaskStore contract the SQLite store also keeps."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.cloud import firestore
from pydantic import ValidationError

from fanfuse import lifecycle
from fanfuse.auth import keys
from fanfuse.errors import DocumentTooLarge, LeaseHeld, TaskConflict, TaskNotFound
from fanfuse.models import (
    CacheEntry,
    Hit,
    PlatformHealth,
    PlatformState,
    TaskStatus,
    utcnow,
)
from fanfuse.quota import Limit
from fanfuse.store.base import Snapshot, Writes
from fanfuse.store.firestore import FirestoreStore
from fanfuse.store.write_log import WriteLog
from tests.e2e.cloud import Cloud, make_task
from tests.health_checks import put_health, race_probe
from tests.quota_checks import hammer, owned_task

LEASE = timedelta(seconds=30)


def raw(db: firestore.Client, path: str) -> dict[str, Any]:
    data: dict[str, Any] = db.document(path).get().to_dict()
    return data


def test_documents_round_trip_with_native_timestamps(e2e: Cloud) -> None:
    store = e2e.store
    task, runs = make_task("rt1", ["alpha", "beta_two"])
    store.create(task, runs)
    assert store.get_task("rt1") == task
    assert store.get_runs("rt1") == runs
    assert store.get_task("nope") is None and store.get_runs("nope") == []

    doc = raw(e2e.db, "searches/rt1")
    assert isinstance(doc["expires_at"], datetime) and doc["expires_at"] == task.expires_at
    assert doc["status"] == "pending" and doc["fusion"] == "rrf"  # enums as their values
    platform = raw(e2e.db, "searches/rt1/platforms/beta_two")
    assert platform["state"] == "queued" and platform["expires_at"] == task.expires_at


def test_transact_reads_writes_declines_and_aborts(e2e: Cloud) -> None:
    store = e2e.store
    store.create(*make_task("tx1", ["alpha", "beta"]))
    with pytest.raises(TaskNotFound):
        store.transact("missing", None, lifecycle.cancel(utcnow()))

    seen: list[Snapshot] = []

    def look(snap: Snapshot) -> Writes | None:
        seen.append(snap)
        return None

    before = e2e.db.document("searches/tx1").get().update_time
    assert store.transact("tx1", ["beta"], look) is None
    assert store.transact("tx1", None, look) is None
    assert list(seen[0].runs) == ["beta"] and list(seen[1].runs) == ["alpha", "beta"]
    assert e2e.db.document("searches/tx1").get().update_time == before  # nothing written

    claimed = store.transact(
        "tx1", ["alpha"], lifecycle.claim("alpha", utcnow(), "w1", lease=LEASE)
    )
    assert claimed is not None and claimed.runs[0].attempt == 1
    assert store.get_runs("tx1")[0].state is PlatformState.RUNNING

    store.transact("tx1", None, lifecycle.cancel(utcnow()))
    with pytest.raises(TaskConflict):  # a mutator's exception aborts and propagates
        store.transact("tx1", None, lifecycle.cancel(utcnow()))
    assert store.get_task("tx1").status is TaskStatus.CANCELLED  # type: ignore[union-attr]


def test_finish_from_two_clients_at_once_counts_the_platform_once(e2e: Cloud) -> None:
    # Two clients stand for two function instances: Firestore's transactions alone decide.
    other = FirestoreStore(e2e.firestore_client())
    store = e2e.store
    store.create(*make_task("fin1", ["alpha", "beta"]))
    store.transact("fin1", ["alpha"], lifecycle.claim("alpha", utcnow(), "w1", lease=LEASE))
    outcome = lifecycle.Outcome(
        state=PlatformState.SUCCEEDED, results=[Hit(url="https://e.test/1", title="one")]
    )
    results: list[Writes | None] = []
    barrier = threading.Barrier(2)

    def finish(s: FirestoreStore) -> None:
        barrier.wait()
        results.append(
            s.transact("fin1", ["alpha"], lifecycle.finish("alpha", outcome, utcnow(), "w1"))
        )

    threads = [threading.Thread(target=finish, args=(s,)) for s in (store, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(r is None for r in results) == [False, True]
    task = store.get_task("fin1")
    assert task is not None and task.counters.done == 1 and task.counters.failed == 0
    assert len(store.get_runs("fin1")[0].results) == 1


def test_patch_run_updates_top_level_fields_only(e2e: Cloud) -> None:
    store = e2e.store
    store.create(*make_task("pr1", ["alpha"]))
    store.transact("pr1", ["alpha"], lifecycle.claim("alpha", utcnow(), "w1", lease=LEASE))
    when = utcnow()
    assert store.patch_run(
        "pr1",
        "alpha",
        {
            "message": "Searching: 1/2 queries",
            "progress": {"current": 1, "total": 2},
            "updated_at": when.isoformat(),
            "not_a_field": 1,
        },
        lease="w1",
    )
    run = store.get_runs("pr1")[0]
    assert run.message == "Searching: 1/2 queries" and run.progress.current == 1
    assert run.state is PlatformState.RUNNING and run.updated_at == when
    doc = raw(e2e.db, "searches/pr1/platforms/alpha")
    assert isinstance(doc["updated_at"], datetime) and "not_a_field" not in doc
    with pytest.raises(ValidationError):
        store.patch_run("pr1", "alpha", {"percent": "lots"}, lease="w1")
    # a missing document stays missing
    assert not store.patch_run("pr1", "nobody", {"message": "x"}, lease="w1")
    assert not e2e.db.document("searches/pr1/platforms/nobody").get().exists


def test_patch_run_only_from_the_lease_holder_of_a_running_run(e2e: Cloud) -> None:
    store = e2e.store
    store.create(*make_task("pl1", ["alpha"]))
    assert not store.patch_run("pl1", "alpha", {"message": "early"}, lease="w1")  # queued
    store.transact("pl1", ["alpha"], lifecycle.claim("alpha", utcnow(), "w1", lease=LEASE))
    assert not store.patch_run("pl1", "alpha", {"message": "intruder"}, lease="w2")
    assert store.patch_run("pl1", "alpha", {"message": "mine", "percent": 50.0}, lease="w1")
    outcome = lifecycle.Outcome(state=PlatformState.SUCCEEDED)
    store.transact("pl1", ["alpha"], lifecycle.finish("alpha", outcome, utcnow(), "w1"))
    ended = store.get_runs("pl1")[0]
    before = e2e.db.document("searches/pl1/platforms/alpha").get().update_time
    late = {"stage": "compressing", "percent": 66.67, "message": "late"}
    assert not store.patch_run("pl1", "alpha", late, lease="w1")
    assert store.get_runs("pl1")[0] == ended and ended.state is PlatformState.SUCCEEDED
    assert e2e.db.document("searches/pl1/platforms/alpha").get().update_time == before


def test_a_live_lease_refuses_a_second_claim_until_it_lapses(e2e: Cloud) -> None:
    store = e2e.store
    store.create(*make_task("ls1", ["alpha"]))
    now = utcnow()
    store.transact("ls1", ["alpha"], lifecycle.claim("alpha", now, "w1", lease=LEASE))
    with pytest.raises(LeaseHeld) as info:
        store.transact("ls1", ["alpha"], lifecycle.claim("alpha", now, "w2", lease=LEASE))
    assert 0 < info.value.retry_after_s <= LEASE.total_seconds()
    run = store.get_runs("ls1")[0]
    assert run.lease == "w1" and run.attempt == 1
    later = run.lease_until + timedelta(seconds=1)  # type: ignore[operator]
    taken = store.transact("ls1", ["alpha"], lifecycle.claim("alpha", later, "w2", lease=LEASE))
    assert taken is not None and (taken.runs[0].lease, taken.runs[0].attempt) == ("w2", 2)
    assert not store.patch_run("ls1", "alpha", {"message": "old holder"}, lease="w1")


def test_content_goes_to_its_own_documents(e2e: Cloud) -> None:
    store = e2e.store
    store.create(*make_task("ct1", ["alpha"]))
    store.transact("ct1", ["alpha"], lifecycle.claim("alpha", utcnow(), "w1", lease=LEASE))
    page = "A long page. " * 2000
    outcome = lifecycle.Outcome(
        state=PlatformState.SUCCEEDED,
        results=[Hit(url="https://e.test/page", title="page", content=page)],
    )
    written = store.transact("ct1", ["alpha"], lifecycle.finish("alpha", outcome, utcnow(), "w1"))
    assert written is not None
    (content_id,) = written.contents
    hit = store.get_runs("ct1")[0].results[0]
    assert hit.content is None and hit.content_id == content_id
    assert store.get_contents("ct1", [content_id, "unknown"]) == {content_id: page}
    doc = raw(e2e.db, f"searches/ct1/contents/{content_id}")
    assert set(doc) == {"text", "expires_at"}


def test_free_form_metadata_survives_firestore(e2e: Cloud) -> None:
    store = e2e.store
    store.create(*make_task("md1", ["alpha"]))
    store.transact("md1", ["alpha"], lifecycle.claim("alpha", utcnow(), "w1", lease=LEASE))
    metadata = {"bbox": [[1, 2], [3, [4, 5]]], "tags": ("a", "b"), "n": None, "x.y": 1.5}
    outcome = lifecycle.Outcome(
        state=PlatformState.SUCCEEDED,
        results=[Hit(url="https://e.test/m", metadata=metadata)],
    )
    store.transact("md1", ["alpha"], lifecycle.finish("alpha", outcome, utcnow(), "w1"))
    stored = store.get_runs("md1")[0].results[0].metadata
    assert stored == {"bbox": [[1, 2], [3, [4, 5]]], "tags": ["a", "b"], "n": None, "x.y": 1.5}


def test_purge_expired_deletes_tasks_with_their_documents(e2e: Cloud) -> None:
    store = e2e.store
    store.create(*make_task("old1", ["alpha"], expires_in=timedelta(seconds=-1)))
    store.create(*make_task("new1", ["alpha"]))
    assert store.purge_expired(utcnow()) == 1
    assert store.get_task("old1") is None and store.get_runs("old1") == []
    assert store.get_task("new1") is not None
    assert store.purge_expired(utcnow()) == 0


def test_withdraw_deletes_one_task_with_its_documents_and_tolerates_a_missing_one(
    e2e: Cloud,
) -> None:
    store = e2e.store
    store.create(*make_task("gone1", ["alpha", "beta"]))
    store.create(*make_task("kept1", ["alpha"]))
    store.withdraw("gone1")
    assert store.get_task("gone1") is None and store.get_runs("gone1") == []
    assert store.get_task("kept1") is not None and len(store.get_runs("kept1")) == 1
    store.withdraw("gone1")  # already gone: no error


def test_a_document_over_one_mib_is_refused_before_anything_is_written(e2e: Cloud) -> None:
    store = e2e.store
    store.create(*make_task("big1", ["alpha"]))
    store.transact("big1", ["alpha"], lifecycle.claim("alpha", utcnow(), "w1", lease=LEASE))
    huge = [Hit(url=f"https://e.test/{i}", snippet="x" * 20_000) for i in range(60)]
    outcome = lifecycle.Outcome(state=PlatformState.SUCCEEDED, results=huge)
    with pytest.raises(DocumentTooLarge, match="searches/big1/platforms/alpha"):
        store.transact("big1", ["alpha"], lifecycle.finish("alpha", outcome, utcnow(), "w1"))
    assert store.get_task("big1").counters.done == 0  # type: ignore[union-attr]
    assert store.get_runs("big1")[0].state is PlatformState.RUNNING


def cache_entry(key: str, stored_at: datetime, provider: str = "stub") -> CacheEntry:
    return CacheEntry(
        key=key,
        platform="web_ok",
        query="q",
        limit=10,
        hits=[Hit(title="t", url="https://e.test/1", rank=1, query_index=0)],
        provider=provider,
        stored_at=stored_at,
        expires_at=stored_at + timedelta(minutes=10),
    )


def test_cache_entries_round_trip_and_are_rewritten_at_most_once_a_second(
    e2e: Cloud, tmp_path: Path
) -> None:
    log = tmp_path / "writes.jsonl"
    store = FirestoreStore(e2e.db, write_log=WriteLog(log))
    now = utcnow()
    entry = cache_entry("ck1", now)
    store.put_cached(entry)
    assert store.get_cached("ck1") == entry
    assert store.get_cached("nope") is None
    doc = raw(e2e.db, "searches_cache/ck1")
    assert isinstance(doc["expires_at"], datetime) and doc["expires_at"] == entry.expires_at
    assert isinstance(doc["stored_at"], datetime)  # the TTL policy needs native timestamps

    # Within a second of the stored entry: skipped, the stored one stays.
    store.put_cached(cache_entry("ck1", now + timedelta(seconds=0.5), provider="second"))
    assert store.get_cached("ck1") == entry
    later = cache_entry("ck1", now + timedelta(seconds=1.5), provider="later")
    store.put_cached(later)
    assert store.get_cached("ck1") == later
    assert WriteLog.read_ops(log) == {("searches_cache/ck1", "cache"): 2}


def test_identical_cache_puts_from_two_clients_at_once_write_once(
    e2e: Cloud, tmp_path: Path
) -> None:
    """Two workers store the same answer at the same moment: one transaction writes it."""
    log = tmp_path / "writes.jsonl"
    stores = [FirestoreStore(e2e.firestore_client(), write_log=WriteLog(log)) for _ in range(2)]
    entry = cache_entry("ck2", utcnow())
    barrier = threading.Barrier(2)

    def put(store: FirestoreStore) -> None:
        barrier.wait()
        store.put_cached(entry)

    threads = [threading.Thread(target=put, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert WriteLog.read_ops(log) == {("searches_cache/ck2", "cache"): 1}
    assert e2e.store.get_cached("ck2") == entry
    for store in stores:
        store.close()


def test_platform_health_round_trips_one_document_per_platform(e2e: Cloud) -> None:
    store = e2e.store
    now = utcnow()
    docs = PlatformHealth(name="docs", latency_s=0.05, samples=1, updated_at=now)
    put_health(store, docs)
    put_health(store, docs.model_copy(update={"name": "google", "latency_s": 1.2}))
    put_health(store, docs.model_copy(update={"samples": 2, "latency_s": 0.07}))
    health = store.get_health()
    assert health["docs"].samples == 2 and health["docs"].latency_s == 0.07
    assert health["google"].latency_s == 1.2
    assert isinstance(raw(e2e.db, "searches_health/docs")["updated_at"], datetime)


def test_one_breaker_probe_among_instances(e2e: Cloud) -> None:
    """update_health's conditioned write: of 8 claimants on 4 clients exactly one may probe."""
    stores = [FirestoreStore(e2e.firestore_client()) for _ in range(4)]
    assert race_probe(stores, "searxng") == 1
    assert raw(e2e.db, "searches_health/searxng")["state"] == "half_open"
    assert (
        stores[0].update_health("searxng", lambda stored: None) == stores[0].get_health()["searxng"]
    )  # nothing to change: nothing written, the stored document returned
    for store in stores:
        store.close()


def test_api_keys_round_trip_under_their_own_collection(e2e: Cloud) -> None:
    store = e2e.store
    _, first = keys.new_key("alice", "laptop", 5, None, utcnow() - timedelta(seconds=1))
    _, second = keys.new_key("bob", "", None, 2, utcnow())
    store.put_key(second)
    store.put_key(first)
    assert store.get_key(first.key_id) == first and store.get_key("0" * 16) is None
    listed = [k for k in store.list_keys() if k.owner != "local"]  # the stack's own key aside
    assert listed == [first, second]  # oldest first
    doc = raw(e2e.db, f"searches_keys/{first.key_id}")
    assert isinstance(doc["created_at"], datetime) and doc["secret_sha256"] == first.secret_sha256
    store.put_key(keys.revoked(first, utcnow()))
    assert store.get_key(first.key_id).revoked_at is not None  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# Quotas (quota.py, admission.py): the same contract as tests/unit/test_quota_store.py


def test_concurrent_takes_from_several_clients_never_exceed_the_bound(
    e2e: Cloud, tmp_path: Path
) -> None:
    """Four clients stand for four function instances: only Firestore orders their writes.
    Each admitted take is one write, so a shard's writes are its admitted takes."""
    log = tmp_path / "writes.jsonl"
    stores = [FirestoreStore(e2e.firestore_client(), write_log=WriteLog(log)) for _ in range(4)]
    assert hammer(stores, "dave", Limit.per_minute(30)) == 30  # 200 attempts, one shard
    sharded = Limit.per_minute(120)  # 4 shards of 30
    admitted = hammer(stores, "erin", sharded)
    assert sharded.burst - 4 <= admitted <= sharded.burst
    writes = WriteLog.read(log, "searches_quota/")
    assert writes["searches_quota/dave#0"] == 30
    assert sum(writes.values()) == 30 + admitted
    assert all(n <= 30 for n in writes.values())  # no shard past its burst at one instant
    bucket = raw(e2e.db, "searches_quota/dave#0")
    assert bucket["tokens"] == 0 and isinstance(bucket["expires_at"], datetime)
    for store in stores:
        store.close()


def test_in_flight_counts_the_owners_live_searches_with_a_count_aggregation(e2e: Cloud) -> None:
    store = e2e.store
    now = utcnow()
    live = [owned_task(store, "frank", now, deadline_s=60) for _ in range(3)]
    owned_task(store, "grace", now, deadline_s=60)
    owned_task(store, "frank", now, deadline_s=1)
    assert store.count_in_flight("frank", now) == 4
    assert store.count_in_flight("frank", now + timedelta(seconds=2)) == 3
    store.transact(live[0], None, lifecycle.cancel(now))
    assert store.count_in_flight("frank", now) == 3
    assert store.count_in_flight("nobody", now) == 0
