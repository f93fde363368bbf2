"""The TaskStore contract, one set of checks for every store: SQLite (tests/unit), Firestore on
its emulator (tests/e2e) and DynamoDB on moto (tests/aws). A store's test module subclasses
StoreContract (or CloudStoreContract) and provides the `harness` fixture: the store on a clean
slate, and a way to open another instance on the same data (another connection or client,
standing for another process or function instance), so that races are the backend's to decide.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from fanfuse.auth import keys
from fanfuse.rules import lifecycle, spend, stats_figures
from fanfuse.rules.budget import adjust, day_key
from fanfuse.rules.mutations import Mutator, Snapshot, Writes
from fanfuse.rules.quota import Limit
from fanfuse.stages.cache import QueryCache, cache_scope
from fanfuse.store.ports import TaskStore
from fanfuse.store.write_log import WriteLog
from fanfuse.wire.errors import DocumentTooLarge, LeaseHeld, TaskConflict, TaskNotFound
from fanfuse.wire.models import (
    CacheEntry,
    HeldCall,
    Hit,
    LimitCut,
    PlatformHealth,
    PlatformState,
    TaskStatus,
    utcnow,
)
from fanfuse.wire.options import CacheMode, SearchOptions
from tests.support import stats_history
from tests.support.budget_checks import DAILY_USD, NOON, reserve_concurrently, spent
from tests.support.fakes import make_task
from tests.support.health_checks import put_health, race_probe
from tests.support.optional import present
from tests.support.quota_checks import hammer, owned_task

LEASE = timedelta(seconds=30)


@dataclass
class Harness:
    store: TaskStore
    instance: Callable[[], TaskStore]
    """Another instance on the same data; the caller closes it."""
    logged: Callable[[WriteLog], TaskStore] | None = None
    """The cloud stores: another instance that counts its writes in a WriteLog."""


def at_once(*calls: Callable[[], None]) -> None:
    """Run `calls` in threads released together."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], None]) -> None:
        barrier.wait(30)
        call()

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)


def claim(name: str, now: datetime, token: str) -> Mutator:
    return lifecycle.claim(name, now, token, lease=LEASE)


def finish(name: str, outcome: lifecycle.Outcome, token: str) -> Mutator:
    return lifecycle.finish(name, outcome, utcnow(), token)


def fan_in(
    store: TaskStore,
    task_id: str,
    name: str,
    outcome: lifecycle.Outcome,
    into: list[Writes | None],
    token: str = "w1",
) -> Callable[[], None]:
    """`token`'s fan-in of `name`'s outcome, for `at_once`; what it wrote goes to `into`."""

    def call() -> None:
        into.append(store.transact(task_id, [name], finish(name, outcome, token)))

    return call


def succeeded(*urls: str) -> lifecycle.Outcome:
    hits = [Hit(url=url, title=url) for url in urls]
    return lifecycle.Outcome(state=PlatformState.SUCCEEDED, results=hits)


def cache_entry(key: str, stored_at: datetime | None = None, provider: str = "stub") -> CacheEntry:
    stored_at = stored_at or utcnow()
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


def take_concurrently(stores: list[TaskStore]) -> int:
    """8 threads on `stores` take 200 times from one shard of 30, then from 4 shards of 30:
    never more than the bound (bounded tries may leave a few). Returns the sharded admits."""
    assert hammer(stores, "dave", Limit.per_minute(30)) == 30
    sharded = Limit.per_minute(120)
    admitted = hammer(stores, "erin", sharded)
    assert sharded.burst - 4 <= admitted <= sharded.burst
    return admitted


def hold_and_cancel_at_once(
    worker: TaskStore, canceller: TaskStore, task_id: str, call: HeldCall
) -> bool:
    """A worker's hold of `call` on `alpha` and a cancel from another instance, at once:
    whether the hold landed (the worker may send the call)."""
    held: list[Writes | None] = []

    def hold() -> None:
        held.append(worker.transact(task_id, ["alpha"], spend.hold("alpha", call)))

    def cancel() -> None:
        canceller.transact(task_id, None, lifecycle.cancel(utcnow()))

    at_once(hold, cancel)
    assert len(held) == 1
    return held[0] is not None


class StoreContract:
    """What every TaskStore does; `harness` comes from the store's test module."""

    @pytest.fixture
    def harness(self) -> Harness:
        raise NotImplementedError("a store's test class provides the harness")

    def test_documents_round_trip(self, harness: Harness) -> None:
        store = harness.store
        task, runs = make_task("rt1", ["alpha", "beta_two"])
        store.create(task, runs)
        assert store.get_task("rt1") == task
        assert store.get_runs("rt1") == runs
        assert store.get_task("nope") is None and store.get_runs("nope") == []

    def test_transact_reads_writes_declines_and_aborts(self, harness: Harness) -> None:
        store = harness.store
        store.create(*make_task("tx1", ["alpha", "beta"]))
        with pytest.raises(TaskNotFound):
            store.transact("missing", None, lifecycle.cancel(utcnow()))
        seen: list[Snapshot] = []

        def look(snap: Snapshot) -> Writes | None:
            seen.append(snap)
            return None

        before = (store.get_task("tx1"), store.get_runs("tx1"))
        assert store.transact("tx1", ["beta"], look) is None
        assert store.transact("tx1", None, look) is None
        assert list(seen[0].runs) == ["beta"] and list(seen[1].runs) == ["alpha", "beta"]
        assert (store.get_task("tx1"), store.get_runs("tx1")) == before

        claimed = store.transact("tx1", ["alpha"], claim("alpha", utcnow(), "w1"))
        assert claimed is not None and claimed.runs[0].attempt == 1
        assert store.get_runs("tx1")[0].state is PlatformState.RUNNING
        store.transact("tx1", None, lifecycle.cancel(utcnow()))
        with pytest.raises(TaskConflict):  # a mutator's exception aborts and propagates
            store.transact("tx1", None, lifecycle.cancel(utcnow()))
        assert present(store.get_task("tx1")).status is TaskStatus.CANCELLED
        # What POST /search's waiter reads after each delivery: the status as transact left it.
        assert store.task_status("tx1") is TaskStatus.CANCELLED
        assert store.task_status("missing") is None

    def test_one_finish_from_two_instances_at_once_counts_the_platform_once(
        self, harness: Harness
    ) -> None:
        store, other = harness.store, harness.instance()
        store.create(*make_task("fin1", ["alpha", "beta"]))
        store.transact("fin1", ["alpha"], claim("alpha", utcnow(), "w1"))
        outcome = succeeded("https://e.test/1")
        results: list[Writes | None] = []
        at_once(*(fan_in(s, "fin1", "alpha", outcome, results) for s in (store, other)))
        assert sorted(r is None for r in results) == [False, True]
        task = store.get_task("fin1")
        assert task is not None and task.counters.done == 1 and task.counters.failed == 0
        assert len(store.get_runs("fin1")[0].results) == 1
        other.close()

    def test_two_platforms_finishing_at_once_are_both_counted(self, harness: Harness) -> None:
        """The fan-in on one task document from two instances: no count is lost."""
        store, other = harness.store, harness.instance()
        names = ["alpha", "beta"]
        store.create(*make_task("fin2", names))
        for name in names:
            store.transact("fin2", [name], claim(name, utcnow(), f"w-{name}"))
        results: list[Writes | None] = []
        pairs = zip((store, other), names, strict=True)
        outcomes = {n: succeeded(f"https://e.test/{n}") for n in names}
        at_once(*(fan_in(s, "fin2", n, outcomes[n], results, f"w-{n}") for s, n in pairs))
        assert all(r is not None for r in results) and len(results) == 2
        task = store.get_task("fin2")
        assert task is not None and task.counters.done == 2
        assert all(r.state is PlatformState.SUCCEEDED for r in store.get_runs("fin2"))
        other.close()

    def test_patch_run_updates_top_level_fields_only(self, harness: Harness) -> None:
        store = harness.store
        store.create(*make_task("pr1", ["alpha"]))
        store.transact("pr1", ["alpha"], claim("alpha", utcnow(), "w1"))
        when = utcnow()
        fields = {
            "message": "Searching: 1/2 queries",
            "progress": {"current": 1, "total": 2},
            "updated_at": when.isoformat(),
            "not_a_field": 1,
        }
        assert store.patch_run("pr1", "alpha", fields, lease="w1")
        run = store.get_runs("pr1")[0]
        assert run.message == "Searching: 1/2 queries" and run.progress.current == 1
        assert run.state is PlatformState.RUNNING and run.updated_at == when
        with pytest.raises(ValidationError):
            store.patch_run("pr1", "alpha", {"percent": "lots"}, lease="w1")
        assert not store.patch_run("pr1", "nobody", {"message": "x"}, lease="w1")
        assert [r.name for r in store.get_runs("pr1")] == ["alpha"]  # nothing made up

    def test_patch_run_only_from_the_lease_holder_of_a_running_run(self, harness: Harness) -> None:
        store = harness.store
        store.create(*make_task("pl1", ["alpha"]))
        assert not store.patch_run("pl1", "alpha", {"message": "early"}, lease="w1")  # queued
        store.transact("pl1", ["alpha"], claim("alpha", utcnow(), "w1"))
        assert not store.patch_run("pl1", "alpha", {"message": "intruder"}, lease="w2")
        assert store.patch_run("pl1", "alpha", {"message": "mine", "percent": 50.0}, lease="w1")
        store.transact("pl1", ["alpha"], finish("alpha", succeeded(), "w1"))
        ended = store.get_runs("pl1")[0]
        late = {"stage": "compressing", "percent": 66.67, "message": "late"}
        assert not store.patch_run("pl1", "alpha", late, lease="w1")
        assert store.get_runs("pl1")[0] == ended and ended.state is PlatformState.SUCCEEDED

    def test_a_live_lease_refuses_a_second_claim_until_it_lapses(self, harness: Harness) -> None:
        store = harness.store
        store.create(*make_task("ls1", ["alpha"]))
        now = utcnow()
        store.transact("ls1", ["alpha"], claim("alpha", now, "w1"))
        with pytest.raises(LeaseHeld) as info:
            store.transact("ls1", ["alpha"], claim("alpha", now, "w2"))
        assert 0 < info.value.retry_after_s <= LEASE.total_seconds()
        run = store.get_runs("ls1")[0]
        assert run.lease == "w1" and run.attempt == 1 and run.lease_until is not None
        later = run.lease_until + timedelta(seconds=1)
        taken = store.transact("ls1", ["alpha"], claim("alpha", later, "w2"))
        assert taken is not None and (taken.runs[0].lease, taken.runs[0].attempt) == ("w2", 2)
        assert not store.patch_run("ls1", "alpha", {"message": "old holder"}, lease="w1")

    def test_content_goes_to_its_own_documents(self, harness: Harness) -> None:
        store = harness.store
        store.create(*make_task("ct1", ["alpha"]))
        store.transact("ct1", ["alpha"], claim("alpha", utcnow(), "w1"))
        page = "A long page. " * 2000
        outcome = lifecycle.Outcome(
            state=PlatformState.SUCCEEDED,
            results=[Hit(url="https://e.test/page", title="page", content=page)],
        )
        written = store.transact("ct1", ["alpha"], finish("alpha", outcome, "w1"))
        assert written is not None
        (content_id,) = written.contents
        hit = store.get_runs("ct1")[0].results[0]
        assert hit.content is None and hit.content_id == content_id
        assert store.get_contents("ct1", [content_id, "unknown"]) == {content_id: page}
        assert store.get_contents("ct1", []) == {}

    def test_free_form_metadata_survives(self, harness: Harness) -> None:
        store = harness.store
        store.create(*make_task("md1", ["alpha"]))
        store.transact("md1", ["alpha"], claim("alpha", utcnow(), "w1"))
        metadata = {"bbox": [[1, 2], [3, [4, 5]]], "tags": ("a", "b"), "n": None, "x.y": 1.5}
        outcome = lifecycle.Outcome(
            state=PlatformState.SUCCEEDED, results=[Hit(url="https://e.test/m", metadata=metadata)]
        )
        store.transact("md1", ["alpha"], finish("alpha", outcome, "w1"))
        stored = store.get_runs("md1")[0].results[0].metadata
        assert stored == {"bbox": [[1, 2], [3, [4, 5]]], "tags": ["a", "b"], "n": None, "x.y": 1.5}

    def test_purge_expired_deletes_tasks_with_their_documents(self, harness: Harness) -> None:
        store = harness.store
        store.create(*make_task("old1", ["alpha"], expires_in=timedelta(seconds=-1)))
        store.create(*make_task("new1", ["alpha"]))
        assert store.purge_expired(utcnow()) == 1
        assert store.get_task("old1") is None and store.get_runs("old1") == []
        assert store.get_task("new1") is not None
        assert store.purge_expired(utcnow()) == 0

    def test_withdraw_deletes_one_task_with_its_documents(self, harness: Harness) -> None:
        store = harness.store
        store.create(*make_task("gone1", ["alpha", "beta"]))
        store.create(*make_task("kept1", ["alpha"]))
        store.withdraw("gone1")
        assert store.get_task("gone1") is None and store.get_runs("gone1") == []
        assert store.get_task("kept1") is not None and len(store.get_runs("kept1")) == 1
        store.withdraw("gone1")  # already gone: no error

    def test_cache_entries_round_trip(self, harness: Harness) -> None:
        store = harness.store
        entry = cache_entry("ck1")
        store.put_cached(entry)
        assert store.get_cached("ck1") == entry and store.get_cached("nope") is None

    def test_an_owners_cache_entry_serves_no_other_owner(self, harness: Harness) -> None:
        """The cache's scope per owner holds on every store: `cache: only` by another owner
        misses what one owner searched; a shared scope serves everyone."""

        def view(scope: str | None, mode: CacheMode = CacheMode.AUTO) -> QueryCache:
            return QueryCache(
                harness.store, platform="web_ok", fingerprint="f", language=None,
                include_content=False, options=SearchOptions(), limit=10, ttl_s=600,
                mode=mode, clock=utcnow, scope=scope,
            )  # fmt: skip

        alice, bob = cache_scope("alice", shared=False), cache_scope("bob", shared=False)
        view(alice).save("what alice plans", [Hit(url="https://e.test/a", title="a")], None)
        assert view(bob, CacheMode.ONLY).lookup("what alice plans") is None
        assert view(alice, CacheMode.ONLY).lookup("what alice plans") is not None
        view(None).save("public", [Hit(url="https://e.test/p", title="p")], None)
        assert view(cache_scope("bob", shared=True), CacheMode.ONLY).lookup("public") is not None

    def test_a_run_cut_by_a_cap_keeps_its_report(self, harness: Harness) -> None:
        store = harness.store
        store.create(*make_task("cut1", ["alpha"]))
        store.transact("cut1", ["alpha"], claim("alpha", utcnow(), "w1"))
        cut = {"page_fetches": LimitCut(cap=66, used=66, skipped=434)}
        outcome = succeeded("https://e.test/1")
        outcome.limits = cut
        store.transact("cut1", ["alpha"], finish("alpha", outcome, "w1"))
        assert store.get_runs("cut1")[0].limits == cut

    def test_platform_health_round_trips_one_document_per_platform(self, harness: Harness) -> None:
        store = harness.store
        docs = PlatformHealth(name="docs", latency_s=0.05, samples=1, updated_at=utcnow())
        put_health(store, docs)
        put_health(store, docs.model_copy(update={"name": "google", "latency_s": 1.2}))
        put_health(store, docs.model_copy(update={"samples": 2, "latency_s": 0.07}))
        health = store.get_health()
        assert health["docs"].samples == 2 and health["docs"].latency_s == 0.07
        assert health["google"].latency_s == 1.2
        # nothing to change: nothing written, the stored document returned
        assert store.update_health("docs", lambda stored: None) == health["docs"]
        assert store.update_health("bing", lambda stored: None) is None
        assert "bing" not in store.get_health()

    def test_one_breaker_probe_among_instances(self, harness: Harness) -> None:
        stores = [harness.instance() for _ in range(4)]
        assert race_probe(stores, "searxng") == 1
        for store in stores:
            store.close()

    def test_api_keys_round_trip(self, harness: Harness) -> None:
        store = harness.store
        _, first = keys.new_key(
            "alice", "laptop", 5, None, utcnow() - timedelta(seconds=1), daily_budget_usd=2.5
        )
        _, second = keys.new_key("bob", "", None, 2, utcnow())
        store.put_key(second)
        store.put_key(first)
        assert store.get_key(first.key_id) == first and store.get_key("0" * 16) is None
        assert first.daily_budget_usd == 2.5  # kept as given (a float in every store)
        listed = [k for k in store.list_keys() if k.owner != "local"]  # a stack's own key aside
        assert listed == [first, second]  # oldest first
        store.put_key(keys.revoked(first, utcnow()))
        assert present(store.get_key(first.key_id)).revoked_at is not None

    def test_concurrent_takes_from_several_instances_never_exceed_the_bound(
        self, harness: Harness, tmp_path: Path
    ) -> None:
        """(`tmp_path`: where the cloud stores' version keeps its write log.)"""
        stores = [harness.instance() for _ in range(4)]
        take_concurrently(stores)
        for store in stores:
            store.close()

    def test_a_daily_budget_holds_under_concurrent_searches(self, harness: Harness) -> None:
        """20 reservations of a cent from several instances against five cents: exactly five
        are written (none counted twice, none lost), the day holds their sum; a settlement
        gives back what a search did not spend, and the budget takes that much more."""
        stores = [harness.instance() for _ in range(4)]
        assert reserve_concurrently(stores, "key:team") == 5
        assert spent(harness.store, "key:team") == pytest.approx(DAILY_USD)
        harness.store.take_quota(day_key("key:team", NOON), adjust(-0.025, NOON))
        assert spent(harness.store, "key:team") == pytest.approx(0.025)
        assert reserve_concurrently(stores, "key:team") == 2  # 2.5 cents left: two of a cent
        assert spent(harness.store, "key:other") == 0  # another key's day is its own
        for store in stores:
            store.close()

    def test_a_call_held_as_its_search_is_cancelled_is_counted_exactly_when_it_is_sent(
        self, harness: Harness
    ) -> None:
        """The spend ledger's race (rules/spend.py), decided by the backend: a worker's hold
        and a cancel from another instance at once. Either the hold lands first (the worker
        sends the call) and the cancel's receipt counts it, or the cancel lands first and the
        hold is refused (the call is never sent) and nothing is counted."""
        store, other = harness.store, harness.instance()
        for i in range(3):
            task_id = f"held{i}"
            store.create(*make_task(task_id, ["alpha"]))
            store.transact(task_id, ["alpha"], claim("alpha", utcnow(), "w1"))
            call = HeldCall(id=f"h{i}", usd=1.0, lease="w1", at=utcnow())
            sent = hold_and_cancel_at_once(store, other, task_id, call)
            task = store.get_task(task_id)
            assert task is not None and task.status is TaskStatus.CANCELLED
            assert task.cost.total_usd == (1.0 if sent else 0.0)
            [run] = store.get_runs(task_id)
            assert [h.id for h in run.held_calls] == ([call.id] if sent else [])
        other.close()

    def test_in_flight_counts_the_owners_live_searches_only(self, harness: Harness) -> None:
        store = harness.store
        now = utcnow()
        live = [owned_task(store, "frank", now, deadline_s=60) for _ in range(3)]
        owned_task(store, "grace", now, deadline_s=60)
        owned_task(store, "frank", now, deadline_s=1)
        assert store.count_in_flight("frank", now) == 4
        assert store.count_in_flight("frank", now + timedelta(seconds=2)) == 3
        store.transact(live[0], None, lifecycle.cancel(now))
        assert store.count_in_flight("frank", now) == 3
        assert store.count_in_flight("nobody", now) == 0

    def test_recent_reads_the_window_newest_first_for_the_stats(self, harness: Harness) -> None:
        store = harness.store
        now = utcnow()
        for search in stats_history.history(now):
            store.create(search.task, list(search.runs))
        since = now - timedelta(hours=24)
        recorded, more = store.recent(since, owner=None, limit=100)
        assert [r.task.task_id for r in recorded] == ["s5", "s4", "s3", "s2", "s1"]
        assert not more
        assert all([run.name for run in r.runs] == stats_history.PLATFORMS for r in recorded)
        figures = stats_figures.compute(
            recorded, store.get_health(), now=now, window=timedelta(hours=24), scope="all"
        )
        stats_history.check_figures(figures.model_dump(mode="json"))
        team, _ = store.recent(since, owner=stats_history.TEAM, limit=100)
        assert [r.task.task_id for r in team] == ["s4", "s3", "s2", "s1"]
        other, _ = store.recent(since, owner=stats_history.OTHER, limit=100)
        assert [r.task.task_id for r in other] == ["s5"]
        newest, more = store.recent(since, owner=None, limit=2)
        assert [r.task.task_id for r in newest] == ["s5", "s4"] and more


class CloudStoreContract(StoreContract):
    """The cloud stores cap a document's size (Firestore 1 MiB, DynamoDB 400 KB) and count
    their writes per document (WriteLog, with Firestore's document paths in both)."""

    def test_concurrent_takes_from_several_instances_never_exceed_the_bound(
        self, harness: Harness, tmp_path: Path
    ) -> None:
        """Each admitted take is one write, so a shard's writes are its admitted takes."""
        assert harness.logged is not None
        log = tmp_path / "writes.jsonl"
        stores = [harness.logged(WriteLog(log)) for _ in range(4)]
        admitted = take_concurrently(stores)
        writes = WriteLog.read(log, "searches_quota/")
        assert writes["searches_quota/dave#0"] == 30
        assert sum(writes.values()) == 30 + admitted
        assert all(n <= 30 for n in writes.values())  # no shard past its burst at one instant
        for store in stores:
            store.close()

    def test_a_document_over_the_cap_is_refused_before_anything_is_written(
        self, harness: Harness
    ) -> None:
        store = harness.store
        store.create(*make_task("big1", ["alpha"]))
        store.transact("big1", ["alpha"], claim("alpha", utcnow(), "w1"))
        huge = [Hit(url=f"https://e.test/{i}", snippet="x" * 20_000) for i in range(60)]
        outcome = lifecycle.Outcome(state=PlatformState.SUCCEEDED, results=huge)
        with pytest.raises(DocumentTooLarge, match="big1/platforms/alpha"):
            store.transact("big1", ["alpha"], finish("alpha", outcome, "w1"))
        assert present(store.get_task("big1")).counters.done == 0
        assert store.get_runs("big1")[0].state is PlatformState.RUNNING
