"""The TaskStore port.

Stores only read and write documents; every decision (count a platform once, finalize once,
refuse to cancel a finished search) is a pure function in `lifecycle.py` that a store runs inside
its own transaction. That way the SQLite and Firestore stores share every rule and differ only in
mechanics.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from fanfuse.rules.mutations import HealthChange, Mutator, QuotaMutator, Writes
from fanfuse.wire.models import ApiKey, CacheEntry, PlatformHealth, PlatformRun, Task


class TaskStore(ABC):
    @abstractmethod
    def create(self, task: Task, runs: Sequence[PlatformRun]) -> None:
        """Write the task and its platform documents atomically (all or nothing)."""

    @abstractmethod
    def withdraw(self, task_id: str) -> None:
        """Delete a task that start refused after writing it (never enqueued, never seen by its
        caller), with everything under it; a missing task is no error."""

    @abstractmethod
    def get_task(self, task_id: str) -> Task | None: ...

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

    @abstractmethod
    def get_cached(self, key: str) -> CacheEntry | None:
        """The search-cache entry under `key`, expired or not (the caller checks `expires_at`)."""

    @abstractmethod
    def put_cached(self, entry: CacheEntry) -> None:
        """Store (replace) a search-cache entry; a store may skip a write that would replace an
        entry written less than a second ago (Firestore: one sustained write/s per document)."""

    @abstractmethod
    def get_health(self) -> dict[str, PlatformHealth]:
        """Every platform's health document, by name (a handful: one per platform)."""

    @abstractmethod
    def update_health(self, name: str, change: HealthChange) -> PlatformHealth | None:
        """ONE atomic read-modify-write of `name`'s health: `change` sees the stored document
        (None: none yet) and returns the one to write, or None to write nothing. Returns the
        document as stored afterwards. The breaker's probe claim relies on it (breaker.py)."""

    # -- API keys (fanfuse.auth.keys): a few small records, written only by `fanfuse keys`

    @abstractmethod
    def put_key(self, key: ApiKey) -> None:
        """Store (replace) one key's record; revoking is a put with `revoked_at` set."""

    @abstractmethod
    def get_key(self, key_id: str) -> ApiKey | None: ...

    @abstractmethod
    def list_keys(self) -> list[ApiKey]:
        """Every key, revoked ones too, oldest first."""

    # -- quotas (quota.py, admission.py) ----------------------------------------------------------

    @abstractmethod
    def take_quota(self, key: str, mutate: QuotaMutator) -> float | None:
        """Read the bucket under `key`, apply `mutate`, write the bucket it returns: ONE atomic
        read-modify-write of ONE document (no other write to it in between, else read again).
        Returns `mutate`'s wait (None: admitted)."""

    @abstractmethod
    def count_in_flight(self, owner: str, now: datetime) -> int:
        """How many of `owner`'s searches are not terminal and still before their deadline."""

    def recoverable(self) -> list[Task]:
        """Tasks not yet terminal that this store's resident process started, for it to resume
        after a restart; a store opened by no resident process (a CLI) recovers nothing, so it
        never re-sends queries nobody is waiting for any more."""
        return []

    def close(self) -> None:
        return None
