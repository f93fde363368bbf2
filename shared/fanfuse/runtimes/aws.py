"""The ports of the AWS runtime: DynamoDB for the store, SQS for the queue, from settings."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fanfuse.settings import Settings

if TYPE_CHECKING:
    from fanfuse.queue.port import TaskQueue
    from fanfuse.store.dynamodb import DynamoStore
    from fanfuse.store.ports import TaskStore


def dynamo_store(settings: Settings) -> DynamoStore:
    """The Lambdas' store, as they open it (also `fanfuse keys --dynamodb`'s)."""
    from fanfuse.net.aws_clients import dynamodb_client
    from fanfuse.store.dynamodb import DynamoStore
    from fanfuse.store.write_log import WriteLog

    log = settings.store_write_log  # the tests' write counts, whatever the store
    return DynamoStore(
        dynamodb_client(settings),
        settings.dynamodb_table,
        write_log=WriteLog(Path(log)) if log else None,
    )


def aws_ports(settings: Settings) -> tuple[TaskStore, TaskQueue]:
    """The store and queue a Lambda handler's service runs on (clients from `aws_clients`)."""
    from fanfuse.queue.sqs import SqsQueue

    return dynamo_store(settings), SqsQueue(settings)
