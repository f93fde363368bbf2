"""The TaskQueue port: deliver "run this platform" and "aggregate this task" at least once.

Names make delivery idempotent at the queue (`{task_id}--{platform}`, a fallback chain's later
members `{task_id}--{platform}--{member}`, `{task_id}--aggregate`, `{task_id}--deadline`); the
lifecycle rules make a second delivery harmless anyway.

Queue ids are named here too (`queue_id`), because two sides must agree on them: whoever creates
the queues (Terraform, `fanfuse dev`) and the functions that enqueue to them.
"""

from __future__ import annotations

import contextvars
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class PlatformMessage(BaseModel):
    """Body of a `run_platform` task: run `platform` of search `task_id`; `member`: the member of
    its fallback chain whose turn it is (None: its first, the platform itself), which sends the
    task to that member's queue (its provider's rate: rules/handover.py)."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    platform: str
    member: str | None = Field(default=None, exclude_if=lambda member: member is None)
    """Left out of the body when None: the task a platform's first turn has always had."""
    carrier: str | None = Field(default=None, exclude_if=lambda carrier: carrier is None)
    """A first turn whose first member cannot run here: the first member that can, whose queue
    carries the task (a platform this deployment does not run has no queue; the turn passes the
    first member over and asks the next, as a worker does for any member that cannot run)."""

    @property
    def queue(self) -> str:
        """The platform whose queue carries the task."""
        return self.member or self.carrier or self.platform

    @property
    def suffix(self) -> str:
        """What the task's name adds to the search's id."""
        return f"{self.platform}--{self.member}" if self.member else self.platform


class AggregateMessage(BaseModel):
    """Body of an `aggregate` task; `deadline` marks the delayed task that forces finalization."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    deadline: bool = False


MAX_PARALLEL_ENQUEUES = 16
"""Enqueues in flight at once for one search (one per platform, up to this)."""
AGGREGATE_QUEUE = "aggregate"
"""The queue (before its prefix) of the aggregate tasks, including the delayed deadline task."""


def queue_id(prefix: str, name: str) -> str:
    """`fanfuse-sec-edgar` for platform `sec_edgar` (queue ids allow no underscore).

    `name` is a platform or AGGREGATE_QUEUE; `prefix` is Settings.queue_prefix
    (FANFUSE_QUEUE_PREFIX), so several deployments can share one project.
    """
    return f"{prefix}-{name.replace('_', '-')}"


def task_name(task_id: str, suffix: str) -> str:
    return f"{task_id}--{suffix.replace('_', '-')}"


class TaskQueue(ABC):
    @abstractmethod
    def enqueue_platform(self, message: PlatformMessage) -> None:
        """Deliver to run_platform on the platform's queue; a duplicate name is success."""

    def enqueue_platforms(self, messages: Sequence[PlatformMessage]) -> None:
        """A search's platform tasks, in order (a queue whose enqueue is a round trip to its
        service sends them at once: `concurrently`)."""
        for message in messages:
            self.enqueue_platform(message)

    @abstractmethod
    def enqueue_aggregate(self, message: AggregateMessage, at: datetime | None = None) -> None:
        """Deliver to aggregate, now or at `at`; a duplicate name is success."""


def concurrently(queue: TaskQueue, messages: Sequence[PlatformMessage]) -> None:
    """`queue.enqueue_platform` for each message at once: each is a round trip to the queue's
    service (Cloud Tasks, SQS), and the last platform's task then waits for none of the
    others'. Each runs in a copy of the caller's context (its trace, its log fields). Raises
    the first failure once every enqueue has ended (the start then finalizes the search)."""
    if len(messages) < 2:
        for message in messages:
            queue.enqueue_platform(message)
        return
    contexts = [contextvars.copy_context() for _ in messages]
    with ThreadPoolExecutor(max_workers=min(len(messages), MAX_PARALLEL_ENQUEUES)) as pool:
        done = [
            pool.submit(c.run, queue.enqueue_platform, m)
            for c, m in zip(contexts, messages, strict=True)
        ]
    for future in done:
        future.result()
