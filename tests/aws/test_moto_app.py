"""The tests' moto server keeps DynamoDB's promise that of concurrent writes conditioned on one
item's version exactly one wins. moto's own threaded server does not (measured: with frequent
thread switches, 27 rounds in 150 of 16 concurrent TransactWriteItems had several winners);
fanfuse.tools.devstack.moto_app serializes DynamoDB requests, and this fails without that."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import suppress
from functools import partial

import pytest
from types_boto3_dynamodb import DynamoDBClient

from fanfuse.net.aws_clients import dynamodb_client
from fanfuse.settings import Settings
from fanfuse.store import dynamodb_codec as codec
from tests.support.store_contract import at_once

WRITERS = 12
ROUNDS = 60


@pytest.fixture
def frequent_switches() -> Iterator[None]:
    """Thread switches as often as a loaded machine makes them, so races show."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def winners(clients: list[DynamoDBClient], table: str, key: codec.Item) -> int:
    """How many of `clients`, writing at once, passed the condition on version 1 of `key`."""
    won: list[int] = []

    def write(client: DynamoDBClient, i: int) -> None:
        item: codec.Item = {**key, "ver": {"N": "2"}, "writer": {"N": str(i)}}
        with suppress(client.exceptions.TransactionCanceledException):
            client.transact_write_items(TransactItems=[codec.put_action(table, item, 1)])
            won.append(i)

    at_once(*(partial(write, c, i) for i, c in enumerate(clients)))
    return len(won)


@pytest.mark.usefixtures("frequent_switches")
def test_of_many_conditional_writes_on_one_version_one_wins(aws_settings: Settings) -> None:
    clients = [dynamodb_client(aws_settings) for _ in range(WRITERS)]
    table = aws_settings.dynamodb_table
    counts = []
    for n in range(ROUNDS):
        key = codec.key(f"race#{n}", "x")
        clients[0].put_item(TableName=table, Item={**key, "ver": {"N": "1"}})
        counts.append(winners(clients, table, key))
    assert counts == [1] * ROUNDS
    for client in clients:
        client.close()
