"""The AWS TaskStore: one DynamoDB table (layout: dynamodb_codec.py, docs/aws.md).

Like the other stores this one only reads and writes: every rule is a pure function from
`lifecycle.py`, `quota.py` or `breaker.py`. DynamoDB has no read-write transactions, so each
read-modify-write is optimistic: read the items (strongly consistent), apply the pure function,
write with every item conditioned on the version it was read at (`ver`), items read but not
written included (`ConditionCheck`). A write that lost a race fails whole and is tried again
from the read after a short random wait, a bounded number of times; that is why the mutators
must be pure, exactly as with Firestore's transactions.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

from botocore.exceptions import ClientError
from pydantic import BaseModel

from fanfuse.net.aws_clients import READ_TIMEOUT_S
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
from fanfuse.store import dynamodb_codec as codec
from fanfuse.store.dynamodb_codec import ensure_table as ensure_table
from fanfuse.store.ports import TaskStore
from fanfuse.store.surfacing import surfacing, until_won
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
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_dynamodb.type_defs import TransactWriteItemTypeDef, WriteRequestTypeDef

log = logging.getLogger(__name__)
D = TypeVar("D", bound=BaseModel)
R = TypeVar("R")
T = TypeVar("T")

ATTEMPTS = 16
"""Tries of one read-modify-write under contention (fan-in from many platforms at once, a
caller's starts on one quota shard). Each lost race waits a random time that grows with the
tries (jittered exponential backoff up to MAX_WAIT_S), so contenders spread out instead of
colliding again in lock step: measured on moto with 8 threads on one item, most takes win at
once and few need more than 6 tries."""
MAX_WAIT_S = 0.5
LOCK_STRIPES = 64
BATCH_WRITE = 25
"""BatchWriteItem's cap on requests per call."""
RUNNING = sorted(s.value for s in TaskStatus if s not in TERMINAL_TASK)


class Contended(Exception):
    """A conditional write found an item changed since it was read: read again."""


@spans.traced_methods("dynamodb", TaskStore)
@surfacing("DynamoDB", codec.stalled, lambda store: store.retry_after_s())
class DynamoStore(TaskStore):
    """TaskStore on one DynamoDB table; `client` is a low-level boto3 client (aws_clients.py
    gives one with timeouts), the table made by `ensure_table`. What a stalled, throttled or
    forever contended table raises surfaces as StoreUnavailable (503, Retry-After)."""

    def __init__(
        self, client: DynamoDBClient, table: str, *, write_log: WriteLog | None = None
    ) -> None:
        self.client = client
        self.table = table
        self.writes = write_log or WriteLog()
        self._stripes = [threading.Lock() for _ in range(LOCK_STRIPES)]

    def retry_after_s(self) -> float:
        """A stall's Retry-After: the client's read timeout, what one call may take."""
        return float(getattr(self.client.meta.config, "read_timeout", None) or READ_TIMEOUT_S)

    def _lock(self, name: str) -> threading.Lock:
        """One read-modify-write per item at a time from this process's threads: they would
        only make each other retry. Between processes, the conditions alone decide."""
        return self._stripes[hash(name) % LOCK_STRIPES]

    # -- reading --------------------------------------------------------------------------------

    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        got = self.client.get_item(TableName=self.table, Key=codec.key(pk, sk), ConsistentRead=True)
        return got.get("Item")

    def _query(
        self, pk: str, prefix: str | None = None, *, since: str | None = None, **extra: Any
    ) -> Iterator[dict[str, Any]]:
        """Every item of partition `pk` whose sort key starts with `prefix` (or is >= `since`)."""
        sk = " AND begins_with(sk, :prefix)" if prefix else " AND sk >= :since" if since else ""
        values: dict[str, Any] = {":pk": {"S": pk}}
        values |= (
            {":prefix": {"S": prefix}} if prefix else {":since": {"S": since}} if since else {}
        )
        condition = "pk = :pk" + sk
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression=condition,
            ExpressionAttributeValues=values,
            ConsistentRead=True,
            **extra,
        )
        for page in pages:
            yield from page.get("Items", [])

    # -- writing --------------------------------------------------------------------------------

    def _checked(self, path: str, item: dict[str, Any]) -> dict[str, Any]:
        size = codec.item_size(item)
        if size > codec.MAX_ITEM_BYTES:
            raise DocumentTooLarge(
                f"{path} would be {size} bytes, over DynamoDB's {codec.MAX_ITEM_BYTES}"
            )
        return item

    def _batch_write(self, requests: Sequence[WriteRequestTypeDef]) -> None:
        """BatchWriteItem in chunks of its cap; what DynamoDB leaves unprocessed (throttled) is
        sent again after a wait, boundedly, then Unavailable."""
        for start in range(0, len(requests), BATCH_WRITE):
            self._write_batch(requests[start : start + BATCH_WRITE])

    def _write_batch(self, chunk: Sequence[WriteRequestTypeDef]) -> None:
        pending: Mapping[str, Sequence[WriteRequestTypeDef]] = {self.table: chunk}

        def once() -> None:
            nonlocal pending
            out = self.client.batch_write_item(RequestItems=pending)
            left = out.get("UnprocessedItems", {}).get(self.table, [])
            if left:
                pending = {self.table: cast("list[WriteRequestTypeDef]", left)}
                raise Contended(f"{len(left)} writes unprocessed")

        self._contended(f"{self.table}: a batch write", once)

    def _delete_all(self, keys: list[dict[str, Any]]) -> None:
        self._batch_write(
            [{"DeleteRequest": {"Key": codec.key(k["pk"]["S"], k["sk"]["S"])}} for k in keys]
        )

    def _contended(self, what: str, once: Callable[[], T]) -> T:
        """`until_won` with this store's tries (ATTEMPTS) and Retry-After."""
        return until_won(
            what,
            once,
            Contended,
            attempts=ATTEMPTS,
            multiplier=0.01,
            max_wait_s=MAX_WAIT_S,
            retry_after_s=self.retry_after_s(),
        )

    def _conditional(self, call: Callable[[], object]) -> None:
        try:
            call()
        except ClientError as exc:
            if codec.raced(exc):
                raise Contended(codec.error_code(exc)) from exc
            raise

    # -- tasks ----------------------------------------------------------------------------------

    def _task_items(
        self, task_id: str, expires_at: datetime, writes: Writes, versions: dict[str, int]
    ) -> list[tuple[str, dict[str, Any], int]]:
        """(path, item, version read) of the task and runs in `writes`, at their next version."""
        pk = codec.task_pk(task_id)
        out: list[tuple[str, dict[str, Any], int]] = []
        if writes.task is not None:
            ver = versions.get(codec.TASK_SK, 0)
            item = codec.item(pk, codec.TASK_SK, writes.task, ver + 1, expires_at)
            out.append((f"searches/{task_id}", item, ver))
        for run in writes.runs:
            sk = codec.run_sk(run.name)
            ver = versions.get(sk, 0)
            item = codec.item(pk, sk, run, ver + 1, expires_at)
            out.append((f"searches/{task_id}/platforms/{run.name}", item, ver))
        return [(path, self._checked(path, item), ver) for path, item, ver in out]

    def _write_contents(self, task_id: str, expires_at: datetime, contents: dict[str, str]) -> None:
        """Page contents go first, outside the transaction (its 100 items and 4 MB would cap
        them): they are keyed by their URL's id, so a retry rewrites the same items, and until
        the transaction commits no run refers to them. A lost race leaves them to the TTL."""
        pk = codec.task_pk(task_id)
        puts: list[WriteRequestTypeDef] = [
            {"PutRequest": {"Item": item}}
            for cid, text in contents.items()
            for item in codec.content_items(pk, cid, text, expires_at)
        ]
        self._batch_write(puts)
        self.writes.record("transact", (f"searches/{task_id}/contents/{c}" for c in contents))

    def create(self, task: Task, runs: Sequence[PlatformRun]) -> None:
        """One TransactWriteItems: the task and its platform items, all or nothing."""
        items = self._task_items(
            task.task_id, task.expires_at, Writes(task=task, runs=list(runs)), {}
        )
        actions: list[TransactWriteItemTypeDef] = [
            {"Put": {"TableName": self.table, "Item": item}} for _, item, _ in items
        ]
        self.client.transact_write_items(TransactItems=actions)
        self.writes.record("create", (path for path, _, _ in items))

    def withdraw(self, task_id: str) -> None:
        keys = list(self._query(codec.task_pk(task_id), ProjectionExpression="pk, sk"))
        self._delete_all(keys)

    def get_task(self, task_id: str) -> Task | None:
        stored = self._get(codec.task_pk(task_id), codec.TASK_SK)
        return None if stored is None else codec.model_of(stored, Task)

    def get_runs(self, task_id: str) -> list[PlatformRun]:
        items = self._query(codec.task_pk(task_id), codec.RUN_PREFIX)
        return sorted((codec.model_of(i, PlatformRun) for i in items), key=lambda r: r.index)

    def patch_run(
        self, task_id: str, name: str, fields: dict[str, Any], *, lease: str | None
    ) -> bool:
        """Read the run, check `progress_accepted`, write it back conditioned on the version
        read: a fan-in or cancel that ended the run in between makes the write fail, and it is
        dropped. One read and one write (progress is throttled by `progress_interval`)."""
        pk, sk = codec.task_pk(task_id), codec.run_sk(name)
        path = f"searches/{task_id}/platforms/{name}"
        stored = self._get(pk, sk)
        if stored is None:
            return False
        run = codec.model_of(stored, PlatformRun)
        if not progress_accepted(run, lease):
            log.debug("dropped a progress write to %s (%s)", path, run.state.value)
            return False
        patched = PlatformRun.model_validate({**run.model_dump(), **fields})
        ver = codec.version(stored)
        expires = int(stored[codec.TTL_ATTRIBUTE]["N"])
        item = self._checked(path, codec.item(pk, sk, patched, ver + 1, None))
        item[codec.TTL_ATTRIBUTE] = {"N": str(expires)}
        try:
            self._conditional(lambda: self._put_if(item, ver))
        except Contended:
            log.debug("dropped a progress write to %s: it changed meanwhile", path)
            return False
        self.writes.record(patch_op(fields), [path])
        return True

    def _put_if(self, item: dict[str, Any], ver: int) -> None:
        """Put `item` if the stored one is still at version `ver` (0: still absent)."""
        self.client.put_item(**codec.put_action(self.table, item, ver)["Put"])

    def transact(self, task_id: str, names: Sequence[str] | None, mutate: Mutator) -> Writes | None:
        """Read the task and the runs, apply `mutate`, write what it returns in one
        TransactWriteItems conditioned on every version read; again from the read on a lost
        race."""
        with self._lock(task_id):
            return self._contended(
                f"searches/{task_id}", lambda: self._transact_once(task_id, names, mutate)
            )

    def _transact_once(
        self, task_id: str, names: Sequence[str] | None, mutate: Mutator
    ) -> Writes | None:
        pk = codec.task_pk(task_id)
        got = {i["sk"]["S"]: i for i in self._query(pk, since=codec.RUN_PREFIX)}  # runs < task
        stored = got.pop(codec.TASK_SK, None)  # one round trip, and no content (content# < run#)
        if stored is None:
            raise TaskNotFound(task_id)
        task = codec.model_of(stored, Task)
        versions = {codec.TASK_SK: codec.version(stored)}
        runs = [(codec.model_of(item, PlatformRun), codec.version(item)) for item in got.values()]
        every = {run.name: (run, version) for run, version in runs}

        def read(wanted: Sequence[str]) -> list[PlatformRun]:  # conditioned on the versions read
            found = [every[name] for name in wanted if name in every]
            versions.update({codec.run_sk(run.name): ver for run, ver in found})
            return [run for run, _ in found]

        found = read(list(every) if names is None else names)
        writes = applied(mutate, task, found, read)  # all runs, if it asks (NeedsAllRuns)
        if writes is None:
            return None
        items = self._task_items(task_id, task.expires_at, writes, versions)
        if writes.contents:
            self._write_contents(task_id, task.expires_at, writes.contents)
        actions = [codec.put_action(self.table, item, ver) for _, item, ver in items]
        written = {item["sk"]["S"] for _, item, _ in items}
        for sk, ver in versions.items():  # read, not written: it must not have changed either
            if sk not in written:
                actions.append(codec.check_action(self.table, pk, sk, ver))
        self._conditional(lambda: self.client.transact_write_items(TransactItems=actions))
        self.writes.record("transact", (path for path, _, _ in items))
        return writes

    def get_contents(self, task_id: str, ids: Sequence[str]) -> dict[str, str]:
        pk = codec.task_pk(task_id)
        out: dict[str, str] = {}
        for cid in dict.fromkeys(ids):
            parts = list(self._query(pk, codec.content_prefix(cid)))
            if parts:
                out[cid] = codec.joined_content(parts)
        return out

    def purge_expired(self, now: datetime) -> int:
        """Delete every item whose TTL passed: tasks with their runs and contents (they carry
        the task's), cache entries, quota shards; returns how many tasks.

        On AWS the table's TTL does this for free (within a day or two of expiry) and nothing
        calls this; it exists for parity with the other stores and for moto, which never
        deletes by TTL. A Scan, fine for those, never for a large table.
        """
        expired: list[dict[str, Any]] = []
        pages = self.client.get_paginator("scan").paginate(
            TableName=self.table,
            FilterExpression="#ttl <= :now",
            ExpressionAttributeNames={"#ttl": codec.TTL_ATTRIBUTE},
            ExpressionAttributeValues={":now": {"N": codec.epoch(now)}},
            ProjectionExpression="pk, sk",
            ConsistentRead=True,
        )
        for page in pages:
            expired.extend(page.get("Items", []))
        self._delete_all(expired)
        return sum(1 for k in expired if k["sk"]["S"] == codec.TASK_SK)

    # -- the search cache, API keys ------------------------------------------------------------

    def get_cached(self, key: str) -> CacheEntry | None:
        stored = self._get(f"cache#{key}", "cache")
        return None if stored is None else codec.model_of(stored, CacheEntry)

    def put_cached(self, entry: CacheEntry) -> None:
        """A plain put, last writer wins: DynamoDB has no per-item write rate to protect (the
        Firestore store skips rewrites within a second for that), and identical searches
        store equivalent answers."""
        path = f"searches_cache/{entry.key}"
        item = codec.item(f"cache#{entry.key}", "cache", entry, 1, entry.expires_at)
        self.client.put_item(TableName=self.table, Item=self._checked(path, item))
        self.writes.record("cache", [path])

    def put_key(self, key: ApiKey) -> None:
        item = codec.item(codec.KEYS_PK, key.key_id, key, 1, None)
        self.client.put_item(TableName=self.table, Item=item)
        self.writes.record("key", [f"searches_keys/{key.key_id}"])

    def get_key(self, key_id: str) -> ApiKey | None:
        stored = self._get(codec.KEYS_PK, key_id)
        return None if stored is None else codec.model_of(stored, ApiKey)

    def list_keys(self) -> list[ApiKey]:
        keys = (codec.model_of(i, ApiKey) for i in self._query(codec.KEYS_PK))
        return sorted(keys, key=lambda k: k.created_at)

    # -- one-item read-modify-writes: platform health, quotas -----------------------------------

    def get_health(self) -> dict[str, PlatformHealth]:
        healths = (codec.model_of(i, PlatformHealth) for i in self._query(codec.HEALTH_PK))
        return {h.name: h for h in healths}

    def update_health(self, name: str, change: HealthChange) -> PlatformHealth | None:
        """One conditional read-modify-write; a look that changes nothing is one read."""
        path = f"searches_health/{name}"
        return self._swap(codec.HEALTH_PK, name, path, PlatformHealth, health_swap(change))

    def take_quota(self, key: str, mutate: QuotaMutator) -> float | None:
        """One conditional read-modify-write; a refusal is a plain read and nothing else."""
        return self._swap(f"quota#{key}", "quota", f"searches_quota/{key}", QuotaBucket, mutate)

    def _swap(
        self,
        pk: str,
        sk: str,
        path: str,
        model: type[D],
        change: Callable[[D | None], tuple[D | None, R]],
    ) -> R:
        """Read the item as `model`, write what `change` returns (None: nothing), conditioned
        on the version read; again from the read while the write loses races."""

        def read() -> tuple[D | None, dict[str, Any] | None]:
            stored = self._get(pk, sk)
            return (None if stored is None else codec.model_of(stored, model)), stored

        def write_if_unchanged(written: D, stored: dict[str, Any] | None) -> None:
            ver = codec.version(stored)
            expires = getattr(written, "expires_at", None)
            item = codec.item(pk, sk, written, ver + 1, expires)
            self._conditional(lambda: self._put_if(item, ver))
            self.writes.record(path.split("/")[0].removeprefix("searches_"), [path])

        def once() -> R:
            return swap_once(read, change, write_if_unchanged)

        with self._lock(path):
            return self._contended(path, once)

    def count_in_flight(self, owner: str, now: datetime) -> int:
        """A COUNT Query on the owner index: the owner's tasks still before their deadline,
        filtered to the ones not terminal (eventually consistent, as any index read)."""
        marks = {f":s{i}": {"S": s} for i, s in enumerate(RUNNING)}
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            IndexName=codec.OWNER_INDEX,
            KeyConditionExpression="#owner = :owner AND #deadline > :now",
            FilterExpression=f"#status IN ({', '.join(marks)})",
            ExpressionAttributeNames={
                "#owner": "owner",
                "#deadline": "deadline",
                "#status": "status",
            },
            ExpressionAttributeValues={
                ":owner": {"S": owner},
                ":now": {"N": repr(now.timestamp())},
                **marks,
            },
            Select="COUNT",
        )
        return sum(page["Count"] for page in pages)

    def recent(
        self, since: datetime, *, owner: str | None, limit: int
    ) -> tuple[list[Recorded], bool]:
        """The window's tasks chosen by `deadline` (at or after `since`: every task created
        since then, and a few created up to one time budget before, which the rules skip):
        an owner's on the owner index, everyone's by a Scan of the task items (a whole-table
        read, paid per item: an operator's occasional question, as `purge_expired`'s is). Then
        the newest `limit` by deadline, each read whole (task and runs, consistently)."""
        names = {"#deadline": "deadline"}
        values: dict[str, Any] = {":since": {"N": repr(since.timestamp())}}
        if owner is not None:
            pages = self.client.get_paginator("query").paginate(
                TableName=self.table,
                IndexName=codec.OWNER_INDEX,
                KeyConditionExpression="#owner = :owner AND #deadline >= :since",
                ExpressionAttributeNames={**names, "#owner": "owner"},
                ExpressionAttributeValues={**values, ":owner": {"S": owner}},
                ProjectionExpression="pk, #deadline",
            )
            found = [item for page in pages for item in page.get("Items", [])]
        else:
            scan = self.client.get_paginator("scan").paginate(
                TableName=self.table,
                FilterExpression="sk = :task AND #deadline >= :since",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={**values, ":task": {"S": codec.TASK_SK}},
                ProjectionExpression="pk, #deadline",
            )
            found = [item for page in scan for item in page.get("Items", [])]
        found.sort(key=lambda item: float(item["deadline"]["N"]), reverse=True)
        recorded: list[Recorded] = []
        for item in found[:limit]:
            task_id = item["pk"]["S"].removeprefix(codec.task_pk(""))
            task = self.get_task(task_id)
            if task is not None:  # deleted (expired) since the index was read
                recorded.append(Recorded(task, self.get_runs(task_id)))
        recorded.sort(key=lambda r: r.task.created_at, reverse=True)
        return recorded, len(found) > limit

    def close(self) -> None:
        self.client.close()
