"""The ports of the AWS runtime: DynamoDB for the store, SQS for the queue, from settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fanfuse.queue.sqs import SqsQueue
from fanfuse.settings import Settings

if TYPE_CHECKING:
    from fanfuse.queue.base import TaskQueue
    from fanfuse.store.base import TaskStore


def aws_ports(settings: Settings) -> tuple[TaskStore, TaskQueue]:
    """The store and queue a Lambda handler's service runs on (clients from `aws_clients`)."""
    from fanfuse.aws_clients import dynamodb_client
    from fanfuse.store.dynamodb import DynamoStore

    return DynamoStore(dynamodb_client(settings), settings.dynamodb_table), SqsQueue(settings)
