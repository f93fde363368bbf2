"""FirestoreStore on the Firestore emulator: the TaskStore contract every store keeps
(tests/support/store_contract.py), and what Firestore stores must hold besides: native timestamps
(the TTL policies read them), one collection per kind, cache rewrites at most once a second."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from google.cloud import firestore

from fanfuse.rules.mutations import Snapshot, Writes
from fanfuse.store.firestore import FirestoreStore
from fanfuse.store.write_log import WriteLog
from fanfuse.wire.models import utcnow
from tests.support.e2e.cloud import Cloud, make_task
from tests.support.store_contract import CloudStoreContract, Harness, at_once, cache_entry


def raw(db: firestore.Client, path: str) -> dict[str, Any]:
    data = db.document(path).get().to_dict()
    assert data is not None, f"no document {path}"
    return data


class TestFirestoreStore(CloudStoreContract):
    """The contract, each check followed by what it wrote as Firestore holds it."""

    cloud: Cloud
    """The stack under the harness: set by the `harness` fixture, which pytest runs on the
    test's own instance, so a check reads back its documents with the contract's signature."""

    @pytest.fixture
    def harness(self, e2e: Cloud) -> Harness:
        self.cloud = e2e
        return Harness(
            store=e2e.store,
            instance=lambda: FirestoreStore(e2e.firestore_client()),
            logged=lambda log: FirestoreStore(e2e.firestore_client(), write_log=log),
        )

    def test_documents_round_trip(self, harness: Harness) -> None:
        super().test_documents_round_trip(harness)
        task = harness.store.get_task("rt1")
        assert task is not None
        doc = raw(self.cloud.db, "searches/rt1")
        assert isinstance(doc["expires_at"], datetime) and doc["expires_at"] == task.expires_at
        assert doc["status"] == "pending" and doc["fusion"] == "rrf"  # enums as their values
        platform = raw(self.cloud.db, "searches/rt1/platforms/beta_two")
        assert platform["state"] == "queued" and platform["expires_at"] == task.expires_at

    def test_patch_run_updates_top_level_fields_only(self, harness: Harness) -> None:
        super().test_patch_run_updates_top_level_fields_only(harness)
        doc = raw(self.cloud.db, "searches/pr1/platforms/alpha")
        assert isinstance(doc["updated_at"], datetime) and "not_a_field" not in doc
        assert not self.cloud.db.document("searches/pr1/platforms/nobody").get().exists

    def test_content_goes_to_its_own_documents(self, harness: Harness) -> None:
        super().test_content_goes_to_its_own_documents(harness)
        (content_id,) = {h.content_id for h in harness.store.get_runs("ct1")[0].results}
        content = raw(self.cloud.db, f"searches/ct1/contents/{content_id}")
        assert set(content) == {"text", "expires_at"}

    def test_platform_health_round_trips_one_document_per_platform(self, harness: Harness) -> None:
        super().test_platform_health_round_trips_one_document_per_platform(harness)
        assert isinstance(raw(self.cloud.db, "searches_health/docs")["updated_at"], datetime)

    def test_api_keys_round_trip(self, harness: Harness) -> None:
        super().test_api_keys_round_trip(harness)
        (first, _) = [k for k in harness.store.list_keys() if k.owner != "local"]
        doc = raw(self.cloud.db, f"searches_keys/{first.key_id}")
        assert (
            isinstance(doc["created_at"], datetime) and doc["secret_sha256"] == first.secret_sha256
        )

    def test_concurrent_takes_from_several_instances_never_exceed_the_bound(
        self, harness: Harness, tmp_path: Path
    ) -> None:
        super().test_concurrent_takes_from_several_instances_never_exceed_the_bound(
            harness, tmp_path
        )
        bucket = raw(self.cloud.db, "searches_quota/dave#0")
        assert bucket["tokens"] == 0 and isinstance(bucket["expires_at"], datetime)


def test_a_transact_that_declines_writes_nothing(e2e: Cloud) -> None:
    store = e2e.store
    store.create(*make_task("tx1", ["alpha", "beta"]))

    def look(snap: Snapshot) -> Writes | None:
        return None

    before = e2e.db.document("searches/tx1").get().update_time
    assert store.transact("tx1", ["beta"], look) is None
    assert store.transact("tx1", None, look) is None
    assert e2e.db.document("searches/tx1").get().update_time == before


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
    at_once(*(partial(s.put_cached, entry) for s in stores))
    assert WriteLog.read_ops(log) == {("searches_cache/ck2", "cache"): 1}
    assert e2e.store.get_cached("ck2") == entry
    for store in stores:
        store.close()
