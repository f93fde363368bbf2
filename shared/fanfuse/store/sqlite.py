"""The embedded TaskStore: one SQLite file in WAL mode, documents kept as JSON.

Transactions are `BEGIN IMMEDIATE` (one writer at a time), which gives the lifecycle rules the same
serializable view that Firestore transactions give them in the cloud.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fanfuse.rules.lifecycle import progress_accepted
from fanfuse.rules.mutations import HealthChange, Mutator, QuotaMutator, Writes, applied
from fanfuse.rules.stats_figures import Recorded
from fanfuse.store.ports import TaskStore
from fanfuse.tracing import spans
from fanfuse.wire.errors import TaskNotFound
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

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id    TEXT PRIMARY KEY,
    status     TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    doc        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_expires ON tasks (expires_at);
CREATE TABLE IF NOT EXISTS platforms (
    task_id  TEXT NOT NULL REFERENCES tasks (task_id) ON DELETE CASCADE,
    name     TEXT NOT NULL,
    position INTEGER NOT NULL,
    doc      TEXT NOT NULL,
    PRIMARY KEY (task_id, name)
);
CREATE TABLE IF NOT EXISTS contents (
    task_id    TEXT NOT NULL REFERENCES tasks (task_id) ON DELETE CASCADE,
    content_id TEXT NOT NULL,
    text       TEXT NOT NULL,
    PRIMARY KEY (task_id, content_id)
);
CREATE TABLE IF NOT EXISTS cache (
    key        TEXT PRIMARY KEY,
    expires_at TEXT NOT NULL,
    doc        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS cache_expires ON cache (expires_at);
CREATE TABLE IF NOT EXISTS health (
    name TEXT PRIMARY KEY,
    doc  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY,
    doc    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS quota (
    key        TEXT PRIMARY KEY,
    expires_at TEXT NOT NULL,
    doc        TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS residents (
    task_id TEXT PRIMARY KEY REFERENCES tasks (task_id) ON DELETE CASCADE,
    resident TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_owner ON tasks (json_extract(doc, '$.owner'), status);
"""

log = logging.getLogger(__name__)

_TERMINAL = tuple(sorted(s.value for s in TERMINAL_TASK))
_NOT_TERMINAL = f"status NOT IN ({','.join('?' * len(_TERMINAL))})"


def _ts(value: datetime) -> str:
    """ISO timestamps in UTC sort as text, which is what the expiry index relies on."""
    return value.astimezone(UTC).isoformat()


@spans.traced_methods("sqlite", TaskStore)
class SqliteStore(TaskStore):
    def __init__(self, path: Path | str, *, resident: str | None = None) -> None:
        """`resident`: the id of the resident process (serve, mcp) that opens this store; the
        searches it creates are marked with it, and only those are `recoverable` by it. None
        (a CLI or library process): nothing is marked, nothing is recoverable."""
        self.path = Path(path)
        self.resident = resident
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(
            str(path), check_same_thread=False, isolation_level=None, timeout=30
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(_SCHEMA)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _put_task(self, db: sqlite3.Connection, task: Task) -> None:
        db.execute(
            "INSERT INTO tasks (task_id, status, expires_at, doc) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (task_id) DO UPDATE SET status = excluded.status, "
            "expires_at = excluded.expires_at, doc = excluded.doc",
            (task.task_id, task.status.value, _ts(task.expires_at), task.model_dump_json()),
        )

    def _put_run(self, db: sqlite3.Connection, run: PlatformRun) -> None:
        db.execute(
            "INSERT INTO platforms (task_id, name, position, doc) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (task_id, name) DO UPDATE SET doc = excluded.doc",
            (run.task_id, run.name, run.index, run.model_dump_json()),
        )

    def create(self, task: Task, runs: Sequence[PlatformRun]) -> None:
        with self._tx() as db:
            self._put_task(db, task)
            for run in runs:
                self._put_run(db, run)
            if self.resident is not None:
                db.execute(
                    "INSERT INTO residents (task_id, resident) VALUES (?, ?)",
                    (task.task_id, self.resident),
                )

    def withdraw(self, task_id: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM tasks WHERE task_id = ?", (task_id,))  # cascades

    def get_task(self, task_id: str) -> Task | None:
        with self._lock:
            row = self._db.execute("SELECT doc FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
        return Task.model_validate_json(row[0]) if row else None

    def task_status(self, task_id: str) -> TaskStatus | None:
        """From the `status` column that every write of the task sets: no JSON parsed."""
        with self._lock:
            row = self._db.execute(
                "SELECT status FROM tasks WHERE task_id = ?", (task_id,)
            ).fetchone()
        return TaskStatus(row[0]) if row else None

    def change_marker(self, task_id: str) -> str | None:
        """The task's status and each document's own `updated_at` (which every write sets),
        read by SQLite's JSON functions in one indexed query: no document reaches Python.
        Each document's stamp, not the newest alone, so that two writes to two documents within
        one microsecond still move it."""
        with self._lock:
            row = self._db.execute(
                "SELECT status || ' ' || json_extract(doc, '$.updated_at') || ' ' || ("
                "SELECT coalesce(group_concat(stamp, ' '), '') FROM ("
                "SELECT json_extract(doc, '$.updated_at') AS stamp FROM platforms "
                "WHERE task_id = ?1 ORDER BY position)) FROM tasks WHERE task_id = ?1",
                (task_id,),
            ).fetchone()
        return str(row[0]) if row else None

    def get_runs(self, task_id: str) -> list[PlatformRun]:
        with self._lock:
            rows = self._db.execute(
                "SELECT doc FROM platforms WHERE task_id = ? ORDER BY position", (task_id,)
            ).fetchall()
        return [PlatformRun.model_validate_json(r[0]) for r in rows]

    def patch_run(
        self, task_id: str, name: str, fields: dict[str, Any], *, lease: str | None
    ) -> bool:
        """Read, check `progress_accepted` and write in one `BEGIN IMMEDIATE` transaction: no
        fan-in or cancel can end the run between the check and the write."""
        with self._tx() as db:
            row = db.execute(
                "SELECT doc FROM platforms WHERE task_id = ? AND name = ?", (task_id, name)
            ).fetchone()
            if row is None:
                return False
            run = PlatformRun.model_validate_json(row[0])
            if not progress_accepted(run, lease):
                log.debug("dropped a progress write to %s/%s (%s)", task_id, name, run.state.value)
                return False
            doc = json.loads(row[0])
            doc.update(fields)
            self._put_run(db, PlatformRun.model_validate(doc))
            return True

    def transact(self, task_id: str, names: Sequence[str] | None, mutate: Mutator) -> Writes | None:
        with self._tx() as db:
            row = db.execute("SELECT doc FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
            if row is None:
                raise TaskNotFound(task_id)
            rows = db.execute(
                "SELECT name, doc FROM platforms WHERE task_id = ? ORDER BY position", (task_id,)
            ).fetchall()
            every = {name: PlatformRun.model_validate_json(doc) for name, doc in rows}
            found = [run for name, run in every.items() if names is None or name in names]
            task = Task.model_validate_json(row[0])
            writes = applied(
                mutate, task, found, lambda wanted: [every[n] for n in wanted if n in every]
            )
            if writes is None:
                return None
            if writes.task is not None:
                self._put_task(db, writes.task)
            for run in writes.runs:
                self._put_run(db, run)
            db.executemany(
                "INSERT OR REPLACE INTO contents (task_id, content_id, text) VALUES (?, ?, ?)",
                [(task_id, cid, text) for cid, text in writes.contents.items()],
            )
            return writes

    def get_contents(self, task_id: str, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        with self._lock:
            rows = self._db.execute(
                "SELECT content_id, text FROM contents"
                f" WHERE task_id = ? AND content_id IN ({marks})",
                (task_id, *ids),
            ).fetchall()
        return dict(rows)

    def get_cached(self, key: str) -> CacheEntry | None:
        with self._lock:
            row = self._db.execute("SELECT doc FROM cache WHERE key = ?", (key,)).fetchone()
        return CacheEntry.model_validate_json(row[0]) if row else None

    def put_cached(self, entry: CacheEntry) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO cache (key, expires_at, doc) VALUES (?, ?, ?)",
                (entry.key, _ts(entry.expires_at), entry.model_dump_json()),
            )

    def get_health(self) -> dict[str, PlatformHealth]:
        with self._lock:
            rows = self._db.execute("SELECT doc FROM health").fetchall()
        healths = [PlatformHealth.model_validate_json(row[0]) for row in rows]
        return {h.name: h for h in healths}

    def update_health(self, name: str, change: HealthChange) -> PlatformHealth | None:
        with self._tx() as db:
            row = db.execute("SELECT doc FROM health WHERE name = ?", (name,)).fetchone()
            stored = PlatformHealth.model_validate_json(row[0]) if row else None
            written = change(stored)
            if written is None:
                return stored
            db.execute(
                "INSERT OR REPLACE INTO health (name, doc) VALUES (?, ?)",
                (name, written.model_dump_json()),
            )
            return written

    # -- API keys -------------------------------------------------------------------------------

    def put_key(self, key: ApiKey) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO api_keys (key_id, doc) VALUES (?, ?)",
                (key.key_id, key.model_dump_json()),
            )

    def get_key(self, key_id: str) -> ApiKey | None:
        with self._lock:
            row = self._db.execute(
                "SELECT doc FROM api_keys WHERE key_id = ?", (key_id,)
            ).fetchone()
        return ApiKey.model_validate_json(row[0]) if row else None

    def list_keys(self) -> list[ApiKey]:
        with self._lock:
            rows = self._db.execute("SELECT doc FROM api_keys").fetchall()
        return sorted((ApiKey.model_validate_json(r[0]) for r in rows), key=lambda k: k.created_at)

    def purge_expired(self, now: datetime) -> int:
        """Expired tasks (counted) and expired cache entries."""
        with self._tx() as db:
            cur = db.execute("DELETE FROM tasks WHERE expires_at <= ?", (_ts(now),))
            db.execute("DELETE FROM cache WHERE expires_at <= ?", (_ts(now),))
            db.execute("DELETE FROM quota WHERE expires_at <= ?", (_ts(now),))
            return cur.rowcount

    # -- quotas: an expression index on the task's owner, so no column (and no migration) -------

    def take_quota(self, key: str, mutate: QuotaMutator) -> float | None:
        with self._tx() as db:
            row = db.execute("SELECT doc FROM quota WHERE key = ?", (key,)).fetchone()
            bucket = QuotaBucket.model_validate_json(row[0]) if row else None
            written, wait = mutate(bucket)
            if written is not None:
                db.execute(
                    "INSERT OR REPLACE INTO quota (key, expires_at, doc) VALUES (?, ?, ?)",
                    (key, _ts(written.expires_at), written.model_dump_json()),
                )
            return wait

    def count_in_flight(self, owner: str, now: datetime) -> int:
        """julianday() reads both timestamp spellings (pydantic's `Z`, `_ts`'s `+00:00`)."""
        with self._lock:
            row = self._db.execute(
                "SELECT COUNT(*) FROM tasks WHERE json_extract(doc, '$.owner') = ?"
                f" AND {_NOT_TERMINAL}"
                " AND julianday(json_extract(doc, '$.deadline_at')) > julianday(?)",
                (owner, *_TERMINAL, _ts(now)),
            ).fetchone()
        return int(row[0])

    def recent(
        self, since: datetime, *, owner: str | None, limit: int
    ) -> tuple[list[Recorded], bool]:
        """One read of the window's task documents (julianday() reads both timestamp
        spellings), one of their platform documents; parsed after the lock is let go, so a
        large window holds up the store's other callers for the reads alone."""
        where = "julianday(json_extract(doc, '$.created_at')) >= julianday(?)"
        params: list[object] = [_ts(since)]
        if owner is not None:
            where += " AND json_extract(doc, '$.owner') = ?"
            params.append(owner)
        with self._lock:
            rows = self._db.execute(
                f"SELECT task_id, doc FROM tasks WHERE {where}"
                " ORDER BY julianday(json_extract(doc, '$.created_at')) DESC LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
            ids = [task_id for task_id, _ in rows[:limit]]
            found: list[tuple[str, str]] = []
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                found += self._db.execute(
                    "SELECT task_id, doc FROM platforms"
                    f" WHERE task_id IN ({','.join('?' * len(chunk))}) ORDER BY task_id, position",
                    chunk,
                ).fetchall()
        runs: dict[str, list[PlatformRun]] = {task_id: [] for task_id in ids}
        for task_id, doc in found:
            runs[task_id].append(PlatformRun.model_validate_json(doc))
        tasks = [Task.model_validate_json(doc) for _, doc in rows[:limit]]
        return [Recorded(t, runs[t.task_id]) for t in tasks], len(rows) > limit

    def recoverable(self) -> list[Task]:
        if self.resident is None:
            return []
        with self._lock:
            rows = self._db.execute(
                "SELECT doc FROM tasks JOIN residents USING (task_id)"
                f" WHERE resident = ? AND {_NOT_TERMINAL}",
                (self.resident, *_TERMINAL),
            ).fetchall()
        return [Task.model_validate_json(r[0]) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()
