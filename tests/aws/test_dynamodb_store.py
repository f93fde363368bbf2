"""DynamoStore on moto's server: the TaskStore contract the SQLite and Firestore stores keep,
then what is DynamoDB's own (items, the TTL attribute, contents in parts, the table)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from botocore.stub import Stubber

from fanfuse.net.aws_clients import (
    CONNECT_TIMEOUT_S,
    MAX_ATTEMPTS,
    READ_TIMEOUT_S,
    client_config,
    dynamodb_client,
)
from fanfuse.rules import lifecycle
from fanfuse.rules.mutations import Snapshot, Writes
from fanfuse.settings import Settings
from fanfuse.store import dynamodb_codec as codec
from fanfuse.store.dynamodb import ATTEMPTS, DynamoStore
from fanfuse.tools.devstack.processes import LOOPBACK
from fanfuse.wire.errors import StoreUnavailable, Unavailable
from fanfuse.wire.models import Hit, PlatformState, utcnow
from tests.support.aws_fixtures import open_dynamo
from tests.support.fakes import make_task
from tests.support.store_contract import CloudStoreContract, Harness, claim, finish


@pytest.fixture
def store(aws_settings: Settings) -> Iterator[DynamoStore]:
    dynamo = open_dynamo(aws_settings)
    yield dynamo
    dynamo.close()


class TestDynamoStore(CloudStoreContract):
    @pytest.fixture
    def harness(self, store: DynamoStore, aws_settings: Settings) -> Harness:
        return Harness(
            store=store,
            instance=lambda: open_dynamo(aws_settings),
            logged=lambda log: open_dynamo(aws_settings, log),
        )


def partition(store: DynamoStore, task_id: str) -> dict[str, dict[str, Any]]:
    """Every item under the task's partition key, by sort key."""
    return {i["sk"]["S"]: i for i in store._query(codec.task_pk(task_id))}


def test_items_carry_their_version_and_the_ttl_of_the_task(store: DynamoStore) -> None:
    task, runs = make_task("it1", ["alpha"])
    store.create(task, runs)
    store.transact("it1", ["alpha"], claim("alpha", utcnow(), "w1"))
    items = partition(store, "it1")
    ttl = str(int(task.expires_at.timestamp()))
    assert {sk: (i["ver"]["N"], i["ttl"]["N"]) for sk, i in items.items()} == {
        "task": ("1", ttl),  # a claim reads the task (a ConditionCheck) and writes the run
        "run#alpha": ("2", ttl),
    }
    assert items["task"]["status"]["S"] == "pending" and "owner" not in items["task"]


def test_a_page_over_an_item_s_400_kb_is_kept_in_parts(store: DynamoStore) -> None:
    """Multi-byte characters, so part boundaries fall inside characters too."""
    store.create(*make_task("ct2", ["alpha"]))
    store.transact("ct2", ["alpha"], claim("alpha", utcnow(), "w1"))
    page = "Spin é, ∑ and 😀. " * 50_000  # 1.2 MB of UTF-8
    outcome = lifecycle.Outcome(
        state=PlatformState.SUCCEEDED, results=[Hit(url="https://e.test/big", content=page)]
    )
    written = store.transact("ct2", ["alpha"], finish("alpha", outcome, "w1"))
    assert written is not None
    (content_id,) = written.contents
    parts = [i for sk, i in partition(store, "ct2").items() if sk.startswith("content#")]
    assert len(parts) == -(-len(page.encode()) // codec.CONTENT_PART_BYTES) >= 3
    assert all(codec.item_size(p) <= codec.MAX_ITEM_BYTES for p in parts)
    assert store.get_contents("ct2", [content_id]) == {content_id: page}
    store.withdraw("ct2")
    assert partition(store, "ct2") == {}  # the parts went with the task


def test_a_transact_that_lost_a_race_reads_again(
    store: DynamoStore, aws_settings: Settings
) -> None:
    """Another instance's fan-in lands between this one's read and its write: the write fails
    on the task's version, and the fan-in is read and applied again on top of the other."""
    other = open_dynamo(aws_settings)
    store.create(*make_task("race1", ["alpha", "beta"]))
    for name in ("alpha", "beta"):
        store.transact("race1", [name], claim(name, utcnow(), "w1"))
    seen: list[int] = []
    alpha = finish("alpha", lifecycle.Outcome(state=PlatformState.SUCCEEDED), "w1")

    def interleaved(snap: Snapshot) -> Writes | None:
        seen.append(snap.task.counters.done)
        if len(seen) == 1:
            beta = lifecycle.Outcome(state=PlatformState.FAILED, error="down")
            other.transact("race1", ["beta"], finish("beta", beta, "w1"))
        return alpha(snap)

    assert store.transact("race1", ["alpha"], interleaved) is not None
    task = store.get_task("race1")
    assert seen == [0, 1] and task is not None
    assert (task.counters.done, task.counters.failed) == (2, 1)  # done counts every end
    other.close()


def test_a_transact_that_never_wins_gives_up_unavailable(
    store: DynamoStore, aws_settings: Settings
) -> None:
    other = open_dynamo(aws_settings)
    store.create(*make_task("race2", ["alpha"]))
    store.transact("race2", ["alpha"], claim("alpha", utcnow(), "w1"))
    calls: list[int] = []

    def always_overtaken(snap: Snapshot) -> Writes | None:
        calls.append(1)
        assert other.patch_run("race2", "alpha", {"message": f"p{len(calls)}"}, lease="w1")
        run = snap.runs["alpha"].model_copy(update={"message": "never"})
        return Writes(runs=[run])

    with pytest.raises(Unavailable, match="contended"):
        store.transact("race2", ["alpha"], always_overtaken)
    assert len(calls) == ATTEMPTS
    assert store.get_runs("race2")[0].message == f"p{ATTEMPTS}"
    other.close()


def test_ensure_table_is_idempotent(aws_settings: Settings) -> None:
    client = dynamodb_client(aws_settings)
    name = aws_settings.dynamodb_table
    codec.ensure_table(client, name)  # made by the fixture already: nothing changes
    table = client.describe_table(TableName=name)["Table"]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert [i["IndexName"] for i in table["GlobalSecondaryIndexes"]] == [codec.OWNER_INDEX]
    ttl = client.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", codec.TTL_ATTRIBUTE)
    codec.ensure_table(client, "fanfuse-other")  # a missing one is made
    assert "fanfuse-other" in client.list_tables()["TableNames"]
    client.close()


@pytest.mark.usefixtures("aws_env")
def test_a_silent_endpoint_fails_the_call_in_bounded_time() -> None:
    """A listener that accepts and never answers: the client's read timeout and bounded
    retries end the call (botocore's defaults would wait 60 s a try), and the store answers
    StoreUnavailable with the read timeout as its Retry-After (a 503, as Firestore's stall)."""
    with socket.create_server((LOOPBACK, 0)) as silent:
        port = silent.getsockname()[1]
        client = boto3.client(
            "dynamodb",
            endpoint_url=f"http://{LOOPBACK}:{port}",
            config=client_config(read_timeout=0.2),
        )
        started = time.monotonic()
        with pytest.raises(ReadTimeoutError):
            client.describe_table(TableName="any")
        assert time.monotonic() - started < MAX_ATTEMPTS * 0.2 + 5
        with pytest.raises(StoreUnavailable, match="DynamoDB did not answer get_task") as info:
            DynamoStore(client, "fanfuse").get_task("t1")
        assert info.value.retry_after_s == 0.2
    settings = Settings(aws_endpoint_url=f"http://{LOOPBACK}:1")
    config = dynamodb_client(settings).meta.config
    # botocore-stubs' Config declares its options as constructor arguments, not attributes
    timeouts = (config.connect_timeout, config.read_timeout)  # type: ignore[attr-defined]
    assert timeouts == (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)


def stubbed_withdraw(unprocessed_answers: int) -> tuple[Stubber, DynamoStore]:
    """A store whose client answers (botocore's Stubber, no server): the task's one item, then
    `unprocessed_answers` batch writes that leave it unprocessed (throttled), then one that
    takes it."""
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url="http://127.0.0.1:9")
    stubber = Stubber(client)
    key = codec.key(codec.task_pk("t1"), codec.TASK_SK)
    stubber.add_response("query", {"Items": [key], "Count": 1})
    delete = {"fanfuse": [{"DeleteRequest": {"Key": key}}]}
    for _ in range(unprocessed_answers):
        stubber.add_response(
            "batch_write_item", {"UnprocessedItems": delete}, {"RequestItems": delete}
        )
    stubber.add_response("batch_write_item", {"UnprocessedItems": {}}, {"RequestItems": delete})
    return stubber, DynamoStore(client, "fanfuse")


@pytest.mark.usefixtures("aws_env")
def test_unprocessed_batch_writes_are_sent_again_boundedly() -> None:
    stubber, store = stubbed_withdraw(2)
    with stubber:
        store.withdraw("t1")
        stubber.assert_no_pending_responses()  # sent three times, then taken
    stubber, store = stubbed_withdraw(ATTEMPTS)
    with stubber, pytest.raises(Unavailable, match="batch write"):
        store.withdraw("t1")
