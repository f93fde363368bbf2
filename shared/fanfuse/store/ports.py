"""The store port, as one role per concern: each consumer asks for the role it uses and no more.

Stores only read and write documents; every decision (count a platform once, finalize once,
refuse to cancel a finished search) is a pure function in `rules/` that a store runs inside its
own transaction. That way the SQLite, Firestore and DynamoDB stores share every rule and differ
only in mechanics.

The roles are Protocols, so a test double stands in for one role with the methods of that role
alone (a cache test needs no task documents). One store object per runtime implements them all:
`TaskStore` is their union, and the three stores subclass it, so a store that misses a method
fails at construction (and in mypy), not on the first call that needs it. Who takes which role:
- `TaskDocuments`: the service's lifecycle (service/service.py), the run's progress
  (stages/stage_run.py:Reporter), the lease renewal (service/heartbeat.py), the executor;
- `CacheStore`: the query cache (stages/cache.py);
- `HealthStore`: the breaker's store side (service/circuit.py) and the platform listing;
- `KeyStore`: the caller check (auth/callers.py) and `fanfuse keys`;
- `QuotaStore`: admission (service/admission.py);
- `StatsStore`: `fanfuse stats` and `GET /stats` (service/stats.py).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from fanfuse.rules.mutations import HealthChange, Mutator, QuotaMutator, Writes
from fanfuse.rules.stats_figures import Recorded
from fanfuse.wire.models import (
    ApiKey,
    CacheEntry,
    PlatformHealth,
    PlatformRun,
    Task,
    TaskStatus,
)


class TaskDocuments(Protocol):
    """A search's task document, its platform documents and their contents."""

    @abstractmethod
    def create(self, task: Task, runs: Sequence[PlatformRun]) -> None:
        """Write the task and its platform documents atomically (all or nothing)."""

    @abstractmethod
    def withdraw(self, task_id: str) -> None:
        """Delete a task that start refused after writing it (never enqueued, never seen by its
        caller), with everything under it; a missing task is no error."""

    @abstractmethod
    def get_task(self, task_id: str) -> Task | None: ...

    def task_status(self, task_id: str) -> TaskStatus | None:
        """The task's status alone (None: no such task), for a waiter that reads it often; a
        store that keeps the status apart from the document reads just that."""
        task = self.get_task(task_id)
        return task.status if task is not None else None

    def change_marker(self, task_id: str) -> str | None:
        """A string that differs whenever the task or one of its platform documents was written
        since it was last read, much cheaper than reading them (a watcher polls it, and reads
        the documents only when it moved: fanfuse.http.streams); None: no such task, or a store
        that knows nothing cheaper than the documents themselves (the watcher reads them)."""
        return None

    @abstractmethod
    def get_runs(self, task_id: str) -> list[PlatformRun]:
        """The task's platform documents, in the task's platform order."""

    @abstractmethod
    def patch_run(
        self, task_id: str, name: str, fields: dict[str, Any], *, lease: str | None
    ) -> bool:
        """Update progress fields of one platform document, only if `lifecycle.progress_accepted`
        (running, and `lease` is its holder's) in the same atomic step; False: dropped (logged
        at debug), as a late write from a worker whose run ended or was taken over must be."""

    @abstractmethod
    def transact(self, task_id: str, names: Sequence[str] | None, mutate: Mutator) -> Writes | None:
        """Read the task and the named runs (None: all), apply `mutate`, write what it returns.

        Returns what was written, or None when `mutate` declined. Raises TaskNotFound when the
        task does not exist; exceptions from `mutate` abort the transaction and propagate.
        """

    @abstractmethod
    def get_contents(self, task_id: str, ids: Sequence[str]) -> dict[str, str]: ...

    @abstractmethod
    def purge_expired(self, now: datetime) -> int:
        """Delete tasks past `expires_at` with everything under them (Firestore: a TTL policy)."""

    def recoverable(self) -> list[Task]:
        """Tasks not yet terminal that this store's resident process started, for it to resume
        after a restart; a store opened by no resident process (a CLI) recovers nothing, so it
        never re-sends queries nobody is waiting for any more."""
        return []


class CacheStore(Protocol):
    """The search cache's entries (stages/cache.py decides what they mean)."""

    @abstractmethod
    def get_cached(self, key: str) -> CacheEntry | None:
        """The search-cache entry under `key`, expired or not (the caller checks `expires_at`)."""

    @abstractmethod
    def put_cached(self, entry: CacheEntry) -> None:
        """Store (replace) a search-cache entry; a store may skip a write that would replace an
        entry written less than a second ago (Firestore: one sustained write/s per document)."""


class HealthStore(Protocol):
    """Each platform's health document (rules/breaker.py, rules/health.py decide the changes)."""

    @abstractmethod
    def get_health(self) -> dict[str, PlatformHealth]:
        """Every platform's health document, by name (a handful: one per platform)."""

    @abstractmethod
    def update_health(self, name: str, change: HealthChange) -> PlatformHealth | None:
        """ONE atomic read-modify-write of `name`'s health: `change` sees the stored document
        (None: none yet) and returns the one to write, or None to write nothing. Returns the
        document as stored afterwards. The breaker's probe claim relies on it (breaker.py)."""


class KeyStore(Protocol):
    """API keys (fanfuse.auth.keys): a few small records, written only by `fanfuse keys`."""

    @abstractmethod
    def put_key(self, key: ApiKey) -> None:
        """Store (replace) one key's record; revoking is a put with `revoked_at` set."""

    @abstractmethod
    def get_key(self, key_id: str) -> ApiKey | None: ...

    @abstractmethod
    def list_keys(self) -> list[ApiKey]:
        """Every key, revoked ones too, oldest first."""


class QuotaStore(Protocol):
    """What admission reads and writes (rules/quota.py, service/admission.py): the token buckets,
    and how many searches a caller has in flight (a count over task documents, but asked only
    by admission, so it belongs to admission's role)."""

    @abstractmethod
    def take_quota(self, key: str, mutate: QuotaMutator) -> float | None:
        """Read the bucket under `key`, apply `mutate`, write the bucket it returns: ONE atomic
        read-modify-write of ONE document (no other write to it in between, else read again).
        Returns `mutate`'s wait (None: admitted)."""

    @abstractmethod
    def count_in_flight(self, owner: str, now: datetime) -> int:
        """How many of `owner`'s searches are not terminal and still before their deadline."""


class StatsStore(Protocol):
    """What the stats read (rules/stats_figures.py decides what the documents mean): the recent
    searches with their platform documents, a bounded number, newest first."""

    @abstractmethod
    def recent(
        self, since: datetime, *, owner: str | None, limit: int
    ) -> tuple[list[Recorded], bool]:
        """The searches created at or after `since` (only `owner`'s when given; None: every
        owner's), each with its platform documents, newest first, at most `limit`; and whether
        the window held more. A store may return a few searches created a little before
        `since` (the DynamoDB store selects by deadline): the rules skip them."""


class TaskStore(TaskDocuments, CacheStore, HealthStore, KeyStore, QuotaStore, StatsStore, Protocol):
    """Every role: what one runtime's store object is, and what only the composition points
    take (the runtimes, which open it, and SearchService, which hands each part its role)."""

    def close(self) -> None:
        return None


ROLES: tuple[type[Any], ...] = (
    TaskDocuments,
    CacheStore,
    HealthStore,
    KeyStore,
    QuotaStore,
    StatsStore,
)
"""The role protocols, for the test that consumers take one of them (tests/unit/test_layers.py)."""
