"""DynamoStore on moto's server: the TaskStore contract the SQLite and Firestore stores keep,
then what is DynamoDB's own (items, the TTL attribute, contents in parts, the table)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fanfuse.aws_clients import dynamodb_client
from fanfuse.settings import Settings
from fanfuse.store import dynamodb_codec as codec
from fanfuse.store.dynamodb import DynamoStore
from tests.store_contract import CloudStoreContract, Harness


def open_store(settings: Settings) -> DynamoStore:
    return DynamoStore(dynamodb_client(settings), settings.dynamodb_table)


@pytest.fixture
def store(aws_settings: Settings) -> Iterator[DynamoStore]:
    dynamo = open_store(aws_settings)
    yield dynamo
    dynamo.close()


class TestDynamoStore(CloudStoreContract):
    @pytest.fixture
    def harness(self, store: DynamoStore, aws_settings: Settings) -> Harness:
        return Harness(store=store, instance=lambda: open_store(aws_settings))


def partition(store: DynamoStore, task_id: str) -> dict[str, dict[str, Any]]:
    """Every item under the task's partition key, by sort key."""
    return {i["sk"]["S"]: i for i in store._query(codec.task_pk(task_id))}
