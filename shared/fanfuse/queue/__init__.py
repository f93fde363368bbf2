"""The TaskQueue port and its implementations: inprocess (embedded) and cloud_tasks (cloud)."""

from fanfuse.queue.base import AggregateMessage, PlatformMessage, TaskQueue, task_name

__all__ = ["AggregateMessage", "PlatformMessage", "TaskQueue", "task_name"]
