"""At-least-once delivery: a fan-in whose aggregate enqueue failed is resumed by the retry."""

from __future__ import annotations

from datetime import datetime

import pytest

from fanfuse.platforms import Registry
from fanfuse.queue.port import AggregateMessage, PlatformMessage, TaskQueue
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.models import TaskStatus
from tests.support.fakes import FakePlatform


class FlakyQueue(TaskQueue):
    """Records deliveries; the first immediate aggregate enqueue fails like a Cloud Tasks 503."""

    def __init__(self) -> None:
        self.platforms: list[PlatformMessage] = []
        self.aggregates: list[AggregateMessage] = []
        self.failures_left = 1

    def enqueue_platform(self, message: PlatformMessage) -> None:
        self.platforms.append(message)

    def enqueue_aggregate(self, message: AggregateMessage, at: datetime | None = None) -> None:
        if at is None and self.failures_left:
            self.failures_left -= 1
            raise ConnectionError("UNAVAILABLE: queue briefly unreachable")
        self.aggregates.append(message)


async def test_retry_after_failed_aggregate_enqueue_finalizes(settings: Settings) -> None:
    queue = FlakyQueue()
    store = SqliteStore(settings.db_path)
    service = SearchService(store, queue, Registry.of([FakePlatform("a")]), settings)
    accepted = service.start({"query": "q"})
    assert [m.deadline for m in queue.aggregates] == [True]
    message = queue.platforms[0]
    with pytest.raises(ConnectionError):  # the worker answers 5xx, so Cloud Tasks redelivers
        await service.run_platform(message)
    assert service.status(accepted.task_id).counters.done == 1
    assert await service.run_platform(message) == "skipped"
    fan_in = queue.aggregates[-1]
    assert fan_in == AggregateMessage(task_id=accepted.task_id)
    assert await service.aggregate(fan_in) == "completed"
    assert await service.aggregate(fan_in) == "already_final"
    view = service.status(accepted.task_id)
    assert view.status is TaskStatus.COMPLETED and view.counters.done == 1
    assert len(view.results) == 5
