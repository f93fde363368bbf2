"""The cloud TaskStore: Firestore documents, the lifecycle rules run in Firestore transactions.

Documents (see the design):

- `{collection}/{task_id}`: the task (`models.Task`);
- `{collection}/{task_id}/platforms/{name}`: one platform run (`models.PlatformRun`);
- `{collection}/{task_id}/contents/{content_id}`: `{"text": ...}`, page content kept out of the
  documents above so that none of them nears Firestore's 1 MiB cap;
- `{collection}_health/{name}`: one platform's measured health and circuit breaker
  (`models.PlatformHealth`): the design's `platform_health/{name}`, named after the
  collection like every other side collection so two deployments sharing a project stay apart;
- `{collection}_cache/{key}`: one search-cache entry (`models.CacheEntry`), with its own TTL
  policy on `expires_at`;
- `{collection}_keys/{key_id}`: one API key (`models.ApiKey`: its hash, never the key);
- `{collection}_quota/{key}`: one shard of a caller's start-rate bucket (`models.QuotaBucket`,
  see quota.py), with a TTL policy on `expires_at` (the emulator has none: they stay there).

Timestamps are stored as native Firestore timestamps, so a TTL policy on `expires_at` works. A
TTL deletion does not cascade to sub-collections, so platform and content documents carry the
task's `expires_at` too (one TTL policy per collection group: searches, platforms, contents);
the models ignore that extra field when they read a document back.

Like the SQLite store this one only reads and writes: every rule is a pure mutator from
`lifecycle.py`, called inside `transact`. Firestore may run a transaction function more than once
under contention, which is why the mutators must be pure.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from fanfuse.rules.lifecycle import progress_accepted
from fanfuse.rules.mutations import (
    HealthChange,
    Mutator,
    QuotaMutator,
    Writes,
    applied,
    health_swap,
)
from fanfuse.rules.stats_figures import Recorded
from fanfuse.settings import Settings
from fanfuse.store import firestore_codec
from fanfuse.store.firestore_calls import (
    TRANSACTION_ATTEMPTS,
    Bounds,
    TaskLocks,
    bound_transactions,
    surfaced,
)
from fanfuse.store.firestore_codec import decode, document_size, encode, model_data, patch_data
from fanfuse.store.ports import TaskStore
from fanfuse.store.swap import swap_once
from fanfuse.store.write_log import WriteLog, patch_op
from fanfuse.tracing import spans
from fanfuse.wire.errors import DocumentTooLarge, TaskNotFound
from fanfuse.wire.models import (
    TERMINAL_TASK,
    ApiKey,
    CacheEntry,
    PlatformHealth,
    PlatformRun,
    QuotaBucket,
    Task,
    TaskStatus,
)

if TYPE_CHECKING:
    from google.cloud.firestore import Client, DocumentReference, DocumentSnapshot, Transaction

log = logging.getLogger(__name__)
R = TypeVar("R")
D = TypeVar("D", bound=BaseModel)

MAX_DOCUMENT_BYTES = 1_048_576
"""Firestore's cap on one document's storage size."""
PURGE_BATCH = 100
GET_ALL_BATCH = 100

CACHE_SUFFIX = "_cache"
HEALTH_SUFFIX = "_health"
KEYS_SUFFIX = "_keys"
QUOTA_SUFFIX = "_quota"
MIN_CACHE_REWRITE_S = 1.0
"""Firestore sustains about one write per second per document: a cache entry is not rewritten
sooner (an entry that young is as fresh as the one that would replace it)."""

PLATFORMS = "platforms"
CONTENTS = "contents"
# ---------------------------------------------------------------------------------------------
# The store


@spans.traced_methods("firestore", TaskStore)
@surfaced
class FirestoreStore(TaskStore):
    """TaskStore on Firestore (sync client). `client` defaults to one for `project`.

    With FIRESTORE_EMULATOR_HOST set, google-cloud-firestore talks to the emulator on its own.
    Every call is bounded by `bounds` and a stall raises StoreUnavailable (firestore_calls.py).
    """

    def __init__(
        self,
        client: Client | None = None,
        *,
        project: str | None = None,
        collection: str = "searches",
        write_log: WriteLog | None = None,
        bounds: Bounds | None = None,
    ) -> None:
        if client is None:
            from google.cloud import firestore

            client = firestore.Client(project=project)
        self.client = client
        self.bounds = bounds or Bounds()
        bound_transactions(client, self.bounds)
        self.collection = collection
        self.writes = write_log or WriteLog()
        self._locks = TaskLocks(self.bounds)

    # -- references ---------------------------------------------------------------------------

    def _task_ref(self, task_id: str) -> DocumentReference:
        ref: DocumentReference = self.client.collection(self.collection).document(task_id)
        return ref

    def _run_ref(self, task_id: str, name: str) -> DocumentReference:
        ref: DocumentReference = self._task_ref(task_id).collection(PLATFORMS).document(name)
        return ref

    def _content_ref(self, task_id: str, content_id: str) -> DocumentReference:
        ref: DocumentReference = self._task_ref(task_id).collection(CONTENTS).document(content_id)
        return ref

    @staticmethod
    def _checked(ref: DocumentReference, data: dict[str, Any]) -> dict[str, Any]:
        size = document_size(ref.path, data)
        if size > MAX_DOCUMENT_BYTES:
            raise DocumentTooLarge(
                f"{ref.path} would be {size} bytes, over Firestore's {MAX_DOCUMENT_BYTES}"
            )
        return data

    def _documents(
        self, task_id: str, expires_at: datetime, writes: Writes
    ) -> list[tuple[DocumentReference, dict[str, Any]]]:
        """What `writes` means in documents; sub-documents carry `expires_at` for the TTL."""
        docs: list[tuple[DocumentReference, dict[str, Any]]] = []
        if writes.task is not None:
            docs.append((self._task_ref(task_id), model_data(writes.task)))
        for run in writes.runs:
            data = {**model_data(run), "expires_at": encode(expires_at)}
            docs.append((self._run_ref(task_id, run.name), data))
        for content_id, text in writes.contents.items():
            data = {"text": text, "expires_at": encode(expires_at)}
            docs.append((self._content_ref(task_id, content_id), data))
        return [(ref, self._checked(ref, data)) for ref, data in docs]

    # -- TaskStore ----------------------------------------------------------------------------

    def create(self, task: Task, runs: Sequence[PlatformRun]) -> None:
        """One batch: the task and its platform documents, all or nothing."""
        docs = self._documents(task.task_id, task.expires_at, Writes(task=task, runs=list(runs)))
        batch = self.client.batch()
        for ref, data in docs:
            batch.set(ref, data)
        batch.commit(**self.bounds.call())
        self.writes.record("create", (ref.path for ref, _ in docs))

    def withdraw(self, task_id: str) -> None:
        self.bounds.delete_tree(self.client, self._task_ref(task_id), (PLATFORMS, CONTENTS))

    def get_task(self, task_id: str) -> Task | None:
        snap = self._task_ref(task_id).get(**self.bounds.call())
        return Task.model_validate(decode(snap.to_dict())) if snap.exists else None

    def get_runs(self, task_id: str) -> list[PlatformRun]:
        docs = self._task_ref(task_id).collection(PLATFORMS).stream(**self.bounds.call())
        runs = [PlatformRun.model_validate(decode(d.to_dict())) for d in docs]
        return sorted(runs, key=lambda r: r.index)

    def patch_run(
        self, task_id: str, name: str, fields: dict[str, Any], *, lease: str | None
    ) -> bool:
        """Read the run, check `progress_accepted`, update top-level fields with a precondition
        on the read's update_time: a fan-in or cancel that ended the run in between makes the
        update fail, and the write is dropped. One read and one write, no transaction (progress
        is throttled by `progress_interval`, under the 1 write/s a document sustains)."""
        from google.api_core.exceptions import FailedPrecondition, NotFound

        data = patch_data(fields)
        if not data:
            return False
        ref = self._run_ref(task_id, name)
        snap = ref.get(**self.bounds.call())
        if not snap.exists:
            return False
        run = PlatformRun.model_validate(decode(snap.to_dict()))
        if not progress_accepted(run, lease):
            log.debug("dropped a progress write to %s (%s)", ref.path, run.state.value)
            return False
        try:
            option = self.client.write_option(last_update_time=snap.update_time)
            ref.update(data, option=option, **self.bounds.call())
        except (FailedPrecondition, NotFound):
            log.debug("dropped a progress write to %s: it changed meanwhile", ref.path)
            return False
        self.writes.record(patch_op(data), [ref.path])
        return True

    def _read(
        self, refs: list[DocumentReference], transaction: Transaction, deadline: float
    ) -> dict[str, Any]:
        """Snapshots by document path (get_all answers in no particular order)."""
        got = self.client.get_all(refs, transaction=transaction, **self.bounds.call(deadline))
        return {d.reference.path: d for d in got}

    def transact(self, task_id: str, names: Sequence[str] | None, mutate: Mutator) -> Writes | None:
        """Read the task and the runs, apply `mutate`, write what it returns: one transaction."""
        from google.cloud import firestore

        task_ref, run_ref = self._task_ref(task_id), functools.partial(self._run_ref, task_id)
        written: list[str] = []
        deadline = self.bounds.deadline()

        @firestore.transactional
        def run(transaction: Transaction) -> Writes | None:
            self.bounds.check(deadline, f"a transaction on {task_ref.path}")
            written.clear()
            # Named runs are read with the task in one round trip; "all" needs the task first.
            refs = [task_ref] + [run_ref(n) for n in names or ()]
            docs = self._read(refs, transaction, deadline)
            snap = docs.pop(task_ref.path)
            if not snap.exists:
                raise TaskNotFound(task_id)
            task = Task.model_validate(decode(snap.to_dict()))

            def read(wanted: Sequence[str]) -> list[PlatformRun]:  # in this transaction
                return firestore_codec.runs_in(
                    self._read(list(map(run_ref, wanted)), transaction, deadline)
                )

            found = read(task.platforms) if names is None else firestore_codec.runs_in(docs)
            writes = applied(mutate, task, found, read)  # all runs, if it asks (NeedsAllRuns)
            if writes is None:
                return None
            for ref, data in self._documents(task_id, task.expires_at, writes):
                transaction.set(ref, data)
                written.append(ref.path)
            return writes

        with self._locks.hold(task_id, deadline):
            result: Writes | None = run(self.client.transaction(max_attempts=TRANSACTION_ATTEMPTS))
        self.writes.record("transact", written)
        return result

    def get_contents(self, task_id: str, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        refs = [self._content_ref(task_id, cid) for cid in ids]
        out: dict[str, str] = {}
        for doc in self.client.get_all(refs, **self.bounds.call()):
            data = doc.to_dict() if doc.exists else None
            if data is not None and isinstance(data.get("text"), str):
                out[doc.id] = data["text"]
        return out

    def _side(self, suffix: str, doc_id: str) -> DocumentReference:
        """A document of a side collection (`{collection}{suffix}`: cache, health, keys...)."""
        ref: DocumentReference = self.client.collection(self.collection + suffix).document(doc_id)
        return ref

    def get_cached(self, key: str) -> CacheEntry | None:
        snap = self._side(CACHE_SUFFIX, key).get(**self.bounds.call())
        return CacheEntry.model_validate(decode(snap.to_dict())) if snap.exists else None

    def put_cached(self, entry: CacheEntry) -> None:
        """Write the entry unless the stored one is younger than MIN_CACHE_REWRITE_S.

        The check and the write are one transaction, so concurrent identical searches (on any
        number of workers) write a given entry at most about once a second.
        """
        from google.cloud import firestore

        ref = self._side(CACHE_SUFFIX, entry.key)
        data = self._checked(ref, model_data(entry))
        deadline = self.bounds.deadline()

        @firestore.transactional
        def run(transaction: Transaction) -> bool:
            self.bounds.check(deadline, f"a transaction on {ref.path}")
            snap = ref.get(transaction=transaction, **self.bounds.call(deadline))
            if snap.exists:
                stored = CacheEntry.model_validate(decode(snap.to_dict())).stored_at
                if (entry.stored_at - stored).total_seconds() < MIN_CACHE_REWRITE_S:
                    return False
            transaction.set(ref, data)
            return True

        with self._locks.hold(entry.key, deadline):
            wrote = run(self.client.transaction(max_attempts=TRANSACTION_ATTEMPTS))
        if wrote:
            self.writes.record("cache", [ref.path])

    def get_health(self) -> dict[str, PlatformHealth]:
        docs = self.client.collection(self.collection + HEALTH_SUFFIX).stream(**self.bounds.call())
        healths = [PlatformHealth.model_validate(decode(doc.to_dict())) for doc in docs]
        return {h.name: h for h in healths}

    def update_health(self, name: str, change: HealthChange) -> PlatformHealth | None:
        """As `take_quota`: a write conditioned on the version read, read again on a lost race,
        so a look that changes nothing (the breaker closed, the common case) is one read."""
        ref = self._side(HEALTH_SUFFIX, name)
        return self._swap(ref, PlatformHealth, health_swap(change), "health")

    # -- API keys -------------------------------------------------------------------------------

    def put_key(self, key: ApiKey) -> None:
        ref = self._side(KEYS_SUFFIX, key.key_id)
        ref.set(model_data(key), **self.bounds.call())
        self.writes.record("key", [ref.path])

    def get_key(self, key_id: str) -> ApiKey | None:
        snap = self._side(KEYS_SUFFIX, key_id).get(**self.bounds.call())
        return ApiKey.model_validate(decode(snap.to_dict())) if snap.exists else None

    def list_keys(self) -> list[ApiKey]:
        docs = self.client.collection(self.collection + KEYS_SUFFIX).stream(**self.bounds.call())
        keys = [ApiKey.model_validate(decode(doc.to_dict())) for doc in docs]
        return sorted(keys, key=lambda k: k.created_at)

    def purge_expired(self, now: datetime) -> int:
        """Delete tasks past `expires_at`, with their platform and content documents.

        In production Firestore's TTL policy on `expires_at` does this for free, and no function
        calls this method. It exists for parity with the SQLite store (same contract, same tests)
        and for the emulator, which has no TTL; the sub-collections go with each task.
        """
        from google.cloud.firestore_v1.base_query import FieldFilter

        query = (
            self.client.collection(self.collection)
            .where(filter=FieldFilter("expires_at", "<=", encode(now)))
            .limit(PURGE_BATCH)
        )
        purged = 0
        while True:
            docs = list(query.stream(**self.bounds.call()))
            for doc in docs:
                self.bounds.delete_tree(self.client, doc.reference, (PLATFORMS, CONTENTS))
            purged += len(docs)
            if len(docs) < PURGE_BATCH:
                break
        cache = self.client.collection(self.collection + CACHE_SUFFIX)
        expired = cache.where(filter=FieldFilter("expires_at", "<=", encode(now)))
        for doc in expired.limit(PURGE_BATCH * 10).stream(**self.bounds.call()):
            doc.reference.delete(**self.bounds.call())
        return purged

    # -- quotas (quota.py, admission.py) ----------------------------------------------------------

    def take_quota(self, key: str, mutate: QuotaMutator) -> float | None:
        """One read-modify-write of `{collection}_quota/{key}`, as a write conditioned on the
        version read (created only if still absent, updated only if not written since): the
        atomicity of a transaction on one document, in one read and one write, and no lock.

        A refusal is a plain read and nothing else, so a flood of refused starts holds no lock
        that the admitted ones would wait on. A write that lost the race reads again after a
        short random wait (instances that collided once would collide again in lock step).
        """
        ref = self._side(QUOTA_SUFFIX, key)
        with self._locks.hold(key, self.bounds.deadline()):
            return self._swap(ref, QuotaBucket, mutate, "quota")

    def _swap(
        self,
        ref: DocumentReference,
        model: type[D],
        change: Callable[[D | None], tuple[D | None, R]],
        kind: str,
    ) -> R:
        """Read `ref` as `model`, write what `change` returns (None: nothing), conditioned on
        the version read (created only if still absent, updated only if not written since);
        again from the read while the write loses races (`Bounds.contended`)."""

        def read() -> tuple[D | None, DocumentSnapshot[DocumentReference]]:
            snap = ref.get(**self.bounds.call())
            return (model.model_validate(decode(snap.to_dict())) if snap.exists else None), snap

        def write_if_unchanged(written: D, snap: DocumentSnapshot[DocumentReference]) -> None:
            data = model_data(written)  # every field (None too): an update replaces all
            if snap.exists:
                option = self.client.write_option(last_update_time=snap.update_time)
                ref.update(data, option=option, **self.bounds.call())
            else:
                ref.create(data, **self.bounds.call())
            self.writes.record(kind, [ref.path])

        def once() -> R:
            return swap_once(read, change, write_if_unchanged)

        return self.bounds.contended(ref.path, once)

    def count_in_flight(self, owner: str, now: datetime) -> int:
        """A count() aggregation (one read per 1,000 entries), on the composite index
        (owner, status, deadline_at) of infra/firestore.indexes.json."""
        from google.cloud.firestore_v1.aggregation import AggregationQuery
        from google.cloud.firestore_v1.base_query import FieldFilter

        running = sorted(s.value for s in TaskStatus if s not in TERMINAL_TASK)
        query = (
            self.client.collection(self.collection)
            .where(filter=FieldFilter("owner", "==", owner))
            .where(filter=FieldFilter("status", "in", running))
            .where(filter=FieldFilter("deadline_at", ">", encode(now)))
        )
        # The library's annotations say count() returns a type and get() a flat list: in fact
        # an AggregationQuery, and one list of results per aggregation run.
        results: Any = AggregationQuery(query).count(alias="n").get(**self.bounds.call())
        return int(results[0][0].value)

    def recent(
        self, since: datetime, *, owner: str | None, limit: int
    ) -> tuple[list[Recorded], bool]:
        """One query on `created_at`, newest first (the automatic single-field index; with an
        owner, the composite (owner, created_at DESC) of infra/firestore.indexes.json), then the
        tasks' platform documents in batched get_all reads."""
        from google.cloud.firestore import Query
        from google.cloud.firestore_v1.base_query import FieldFilter

        query = self.client.collection(self.collection).where(
            filter=FieldFilter("created_at", ">=", encode(since))
        )
        if owner is not None:
            query = query.where(filter=FieldFilter("owner", "==", owner))
        query = query.order_by("created_at", direction=Query.DESCENDING).limit(limit + 1)
        docs = list(query.stream(**self.bounds.call()))
        tasks = [Task.model_validate(decode(d.to_dict())) for d in docs[:limit]]
        refs = [self._run_ref(t.task_id, name) for t in tasks for name in t.platforms]
        runs: dict[str, list[PlatformRun]] = {t.task_id: [] for t in tasks}
        for start in range(0, len(refs), GET_ALL_BATCH):
            batch = refs[start : start + GET_ALL_BATCH]
            for snap in self.client.get_all(batch, **self.bounds.call()):
                if snap.exists:
                    run = PlatformRun.model_validate(decode(snap.to_dict()))
                    runs[run.task_id].append(run)
        recorded = [Recorded(t, sorted(runs[t.task_id], key=lambda r: r.index)) for t in tasks]
        return recorded, len(docs) > limit

    def close(self) -> None:
        client: Any = self.client  # its close() is untyped
        client.close()


def store_from_settings(settings: Settings) -> FirestoreStore:
    """The store a Cloud Function uses: project, collection and write log from Settings."""
    log_path = settings.store_write_log
    return FirestoreStore(
        project=settings.project,
        collection=settings.collection,
        write_log=WriteLog(Path(log_path)) if log_path else None,
    )
