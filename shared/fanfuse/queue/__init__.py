"""The TaskQueue port and its implementations: inprocess (embedded) and cloud_tasks (cloud)."""

from fanfuse.queue.base import (
    AGGREGATE_QUEUE,
    AggregateMessage,
    PlatformMessage,
    TaskQueue,
    queue_id,
    task_name,
)

__all__ = [
    "AGGREGATE_QUEUE",
    "AggregateMessage",
    "PlatformMessage",
    "TaskQueue",
    "queue_id",
    "task_name",
]
