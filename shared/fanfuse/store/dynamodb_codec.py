"""The DynamoDB table's layout: keys, items <-> models, item sizes, page contents in parts, the
table itself (`ensure_table`), and which of DynamoDB's errors are a lost race and which a stall.

One table (docs/aws.md), partition key `pk`, sort key `sk`:

- `search#{task_id}` / `task`: the task; `run#{name}`: one platform run;
  `content#{content_id}#{part}`: one part of one page's text (binary UTF-8);
- `cache#{key}` / `cache`, `quota#{key}` / `quota`: one search-cache entry, one quota shard;
- `health` / `{name}`, `keys` / `{key_id}`: the platforms' health and the API keys, each kind
  in one partition so that listing them is one Query.

A model is kept whole as its JSON (`doc`): DynamoDB's own types would add nothing the store
reads, and JSON keeps free-form metadata (nested arrays, floats) exactly as pydantic wrote it.
Beside it, the few attributes DynamoDB itself must see: `ver` (the optimistic-concurrency
version every conditional write checks), `ttl` (epoch seconds of `expires_at`: the table's TTL
attribute), and on tasks `owner`, `status`, `deadline` (the in-flight count's index).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import suppress
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from botocore.exceptions import ClientError, ConnectionError, HTTPClientError
from pydantic import BaseModel

from fanfuse.wire.models import Task

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_dynamodb.type_defs import (
        AttributeValueTypeDef,
        ConditionCheckTypeDef,
        PutTypeDef,
        TransactWriteItemTypeDef,
        WaiterConfigTypeDef,
    )

Item = dict[str, "AttributeValueTypeDef"]
M = TypeVar("M", bound=BaseModel)

MAX_ITEM_BYTES = 400 * 1024
"""DynamoDB's cap on one item (attribute names and values)."""
CONTENT_PART_BYTES = 350 * 1024
"""A page's text is split into parts of at most this many bytes, each its own item: a part
with its keys stays under MAX_ITEM_BYTES whatever the text."""
OWNER_INDEX = "owner-deadline"
"""GSI: the tasks of one owner by deadline (`count_in_flight`); only tasks carry `owner`."""
TTL_ATTRIBUTE = "ttl"
TABLE_WAIT: WaiterConfigTypeDef = {"Delay": 1, "MaxAttempts": 60}
"""Bounded wait for a new table to become active (moto: at once; AWS: seconds)."""

ABSENT = "attribute_not_exists(pk)"
AT_VERSION = "ver = :ver"
"""Every conditional write of the store: the item is still at the version that was read."""
TASK_SK = "task"
RUN_PREFIX = "run#"
CONTENT_PREFIX = "content#"
HEALTH_PK = "health"
KEYS_PK = "keys"


def task_pk(task_id: str) -> str:
    return f"search#{task_id}"


def run_sk(name: str) -> str:
    return RUN_PREFIX + name


def content_prefix(content_id: str) -> str:
    return f"{CONTENT_PREFIX}{content_id}#"


def key(pk: str, sk: str) -> Item:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def epoch(when: datetime) -> str:
    """A DynamoDB number (sent as text): whole seconds for the TTL, as DynamoDB reads it."""
    return str(int(when.timestamp()))


def item(pk: str, sk: str, model: BaseModel, ver: int, expires_at: datetime | None) -> Item:
    """The item of one model document at version `ver`, with its TTL when it expires."""
    out: Item = {**key(pk, sk), "doc": {"S": model.model_dump_json()}, "ver": {"N": str(ver)}}
    if expires_at is not None:
        out[TTL_ATTRIBUTE] = {"N": epoch(expires_at)}
    if isinstance(model, Task):
        out["status"] = {"S": model.status.value}
        out["deadline"] = {"N": repr(model.deadline_at.timestamp())}
        if model.owner:  # a key attribute of the index: absent, never empty
            out["owner"] = {"S": model.owner}
    return out


def model_of(stored: Mapping[str, AttributeValueTypeDef], model: type[M]) -> M:
    return model.model_validate_json(stored["doc"]["S"])


def version(stored: Mapping[str, AttributeValueTypeDef] | None) -> int:
    """The stored item's version; 0: no item."""
    return 0 if stored is None else int(stored["ver"]["N"])


def put_action(table: str, item: Item, ver: int) -> TransactWriteItemTypeDef:
    """Put `item` if the stored one is still at version `ver` (0: still absent)."""
    if ver == 0:
        return {"Put": {"TableName": table, "Item": item, "ConditionExpression": ABSENT}}
    values: Item = {":ver": {"N": str(ver)}}
    put: PutTypeDef = {
        "TableName": table,
        "Item": item,
        "ConditionExpression": AT_VERSION,
        "ExpressionAttributeValues": values,
    }
    return {"Put": put}


def check_action(table: str, pk: str, sk: str, ver: int) -> TransactWriteItemTypeDef:
    """An item read at version `ver` (not 0: it was read), not written, is still at it."""
    check: ConditionCheckTypeDef = {
        "TableName": table,
        "Key": key(pk, sk),
        "ConditionExpression": AT_VERSION,
        "ExpressionAttributeValues": {":ver": {"N": str(ver)}},
    }
    return {"ConditionCheck": check}


def item_size(stored: Mapping[str, AttributeValueTypeDef]) -> int:
    """An item's size by DynamoDB's rules, rounded up: names and values in bytes (a number at
    most its digits), the attribute types this store writes."""
    size = 0
    for name, value in stored.items():
        size += len(name.encode())
        if "S" in value:
            size += len(value["S"].encode())
        elif "N" in value:
            size += len(value["N"]) + 1
        elif "B" in value:
            data = value["B"]
            size += len(data) if isinstance(data, bytes | bytearray) else len(str(data))
        else:
            raise TypeError(f"no size rule for attribute {name}")
    return size


def content_parts(text: str) -> Iterator[bytes]:
    """The page's UTF-8 bytes in parts of at most CONTENT_PART_BYTES (one part for ""): joined
    back they are the text, whatever character a cut falls in."""
    data = text.encode()
    for start in range(0, max(len(data), 1), CONTENT_PART_BYTES):
        yield data[start : start + CONTENT_PART_BYTES]


def content_items(pk: str, content_id: str, text: str, expires_at: datetime) -> list[Item]:
    """A page's text as part items `content#{id}#{part:04d}` (sorted as numbered)."""
    prefix = content_prefix(content_id)
    return [
        {
            **key(pk, f"{prefix}{n:04d}"),
            "text": {"B": part},
            TTL_ATTRIBUTE: {"N": epoch(expires_at)},
        }
        for n, part in enumerate(content_parts(text))
    ]


def joined_content(parts: Sequence[Mapping[str, AttributeValueTypeDef]]) -> str:
    """The text of part items as a Query returns them (in sort-key order)."""
    data = b"".join(bytes(p["text"]["B"]) for p in parts)  # type: ignore[arg-type]
    return data.decode()


THROTTLED_OR_DOWN = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
    }
)
"""Answers botocore retries on its own (standard mode): still there after its tries, the table
is overloaded or down, a StoreUnavailable."""


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def raced(exc: ClientError) -> bool:
    """A conditional write or a transaction that lost a race (not a bad request)."""
    if error_code(exc) == "ConditionalCheckFailedException":
        return True
    if error_code(exc) != "TransactionCanceledException":
        return False
    reasons = [str(r.get("Code", "None")) for r in exc.response.get("CancellationReasons", [])]
    return any(r in ("ConditionalCheckFailed", "TransactionConflict") for r in reasons)


def stalled(exc: BaseException) -> bool:
    """What a stalled or overloaded DynamoDB raises once botocore's bounded tries are spent:
    a connection that failed or timed out, a throttle or a server error."""
    if isinstance(exc, ClientError):
        return error_code(exc) in THROTTLED_OR_DOWN
    return isinstance(exc, ConnectionError | HTTPClientError)


def ensure_table(client: DynamoDBClient, table: str) -> None:
    """Create the table if it is missing (on-demand billing, the owner index), wait until it is
    active, and turn its TTL on: idempotent, and safe to run from two processes at once."""
    try:
        client.describe_table(TableName=table)
    except client.exceptions.ResourceNotFoundException:
        with suppress(client.exceptions.ResourceInUseException):  # made by another meanwhile
            _create_table(client, table)
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig=TABLE_WAIT)
    ttl = client.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
        client.update_time_to_live(
            TableName=table,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
        )


def _create_table(client: DynamoDBClient, table: str) -> None:
    client.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "owner", "AttributeType": "S"},
            {"AttributeName": "deadline", "AttributeType": "N"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": OWNER_INDEX,
                "KeySchema": [
                    {"AttributeName": "owner", "KeyType": "HASH"},
                    {"AttributeName": "deadline", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["status"]},
            }
        ],
    )
