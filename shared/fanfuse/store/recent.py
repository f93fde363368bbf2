"""The StatsStore role's reads on the cloud stores (`recent`: the stats' window of searches).

Apart from firestore.py and dynamodb.py, whose classes call these, to keep each store module
within the size the layout allows; the functions take the pieces of a store they use, so this
module imports neither store (no cycle), and each imports its backend's modules itself: a
function deployed with one cloud's libraries never imports the other's (botocore on Google
Cloud, google-cloud-firestore on Lambda).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fanfuse.rules.stats import Recorded
from fanfuse.wire.models import PlatformRun, Task

if TYPE_CHECKING:
    from google.cloud.firestore import Client, DocumentReference
    from types_boto3_dynamodb import DynamoDBClient

    from fanfuse.store.firestore_calls import Bounds

GET_ALL_BATCH = 100


def firestore_recent(
    client: Client,
    collection: str,
    bounds: Bounds,
    run_ref: Callable[[str, str], DocumentReference],
    window: tuple[datetime, str | None, int],
) -> tuple[list[Recorded], bool]:
    """One query on `created_at`, newest first (the automatic single-field index; with an
    owner, the composite (owner, created_at DESC) of infra/firestore.indexes.json), then the
    tasks' platform documents in batched get_all reads. `window`: (since, owner, limit)."""
    from google.cloud.firestore import Query
    from google.cloud.firestore_v1.base_query import FieldFilter

    from fanfuse.store.firestore_codec import decode, encode

    since, owner, limit = window
    query = client.collection(collection).where(
        filter=FieldFilter("created_at", ">=", encode(since))
    )
    if owner is not None:
        query = query.where(filter=FieldFilter("owner", "==", owner))
    query = query.order_by("created_at", direction=Query.DESCENDING).limit(limit + 1)
    docs = list(query.stream(**bounds.call()))
    tasks = [Task.model_validate(decode(d.to_dict())) for d in docs[:limit]]
    refs = [run_ref(t.task_id, name) for t in tasks for name in t.platforms]
    runs: dict[str, list[PlatformRun]] = {t.task_id: [] for t in tasks}
    for start in range(0, len(refs), GET_ALL_BATCH):
        for snap in client.get_all(refs[start : start + GET_ALL_BATCH], **bounds.call()):
            if snap.exists:
                run = PlatformRun.model_validate(decode(snap.to_dict()))
                runs[run.task_id].append(run)
    recorded = [Recorded(t, sorted(runs[t.task_id], key=lambda r: r.index)) for t in tasks]
    return recorded, len(docs) > limit


def dynamo_recent(
    client: DynamoDBClient,
    table: str,
    read: Callable[[str], Recorded | None],
    window: tuple[datetime, str | None, int],
) -> tuple[list[Recorded], bool]:
    """The window's tasks chosen by `deadline` (at or after `since`: every task created since
    then, and a few created up to one time budget before, which the rules skip): an owner's on
    the owner index, everyone's by a Scan of the task items (a whole-table read, paid per item:
    an operator's occasional question, as `purge_expired`'s is). Then the newest `limit` by
    deadline, each read whole by `read` (task and runs, consistently)."""
    from fanfuse.store import dynamodb_codec as codec

    since, owner, limit = window
    names = {"#deadline": "deadline"}
    values: dict[str, Any] = {":since": {"N": repr(since.timestamp())}}
    if owner is not None:
        pages = client.get_paginator("query").paginate(
            TableName=table,
            IndexName=codec.OWNER_INDEX,
            KeyConditionExpression="#owner = :owner AND #deadline >= :since",
            ExpressionAttributeNames={**names, "#owner": "owner"},
            ExpressionAttributeValues={**values, ":owner": {"S": owner}},
            ProjectionExpression="pk, #deadline",
        )
        found = [item for page in pages for item in page.get("Items", [])]
    else:
        scan = client.get_paginator("scan").paginate(
            TableName=table,
            FilterExpression="sk = :task AND #deadline >= :since",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={**values, ":task": {"S": codec.TASK_SK}},
            ProjectionExpression="pk, #deadline",
        )
        found = [item for page in scan for item in page.get("Items", [])]
    found.sort(key=lambda item: float(item["deadline"]["N"]), reverse=True)
    recorded = [
        search
        for item in found[:limit]
        if (search := read(item["pk"]["S"].removeprefix(codec.task_pk("")))) is not None
    ]  # None: deleted (expired) since the index was read
    recorded.sort(key=lambda r: r.task.created_at, reverse=True)
    return recorded, len(found) > limit
