"""Test platforms: real Platform subclasses whose answers the test decides (and a status
document to answer with)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from fanfuse.platforms.contract import (
    Capabilities,
    Platform,
    PlatformContext,
    PlatformSettings,
    SearchParams,
)
from fanfuse.queue.port import PlatformMessage, TaskQueue
from fanfuse.wire.models import (
    FusionMethod,
    Hit,
    PlatformRun,
    SearchRequest,
    Task,
    TaskView,
    utcnow,
)


def pending_task(
    task_id: str, owner: str | None, now: datetime, *, deadline_s: float = 0.0
) -> Task:
    """A pending search started by `owner` (None: anonymously) at `now`."""
    request = SearchRequest.model_validate({"query": "q", "platform": "docs"})
    return Task(
        task_id=task_id,
        owner=owner,
        request=request,
        queries=request.queries,
        platforms=request.platforms,
        fusion=FusionMethod.RRF,
        created_at=now,
        updated_at=now,
        deadline_at=now + timedelta(seconds=deadline_s),
        expires_at=now + timedelta(minutes=30),
    )


def make_task(
    task_id: str, names: list[str], *, expires_in: timedelta = timedelta(minutes=30)
) -> tuple[Task, list[PlatformRun]]:
    """A task and its queued platform runs, as start_search would write them."""
    now = utcnow()
    request = SearchRequest.model_validate({"query": ["q one", "q two"], "platform": names})
    task = Task(
        task_id=task_id,
        request=request,
        queries=request.queries,
        platforms=names,
        fusion=FusionMethod.RRF,
        created_at=now,
        updated_at=now,
        deadline_at=now + timedelta(minutes=2),
        expires_at=now + expires_in,
    )
    runs = [
        PlatformRun(task_id=task_id, name=n, index=i, of=len(names)) for i, n in enumerate(names, 1)
    ]
    return task, runs


def task_view(task_id: str, owner: str | None) -> TaskView:
    """A pending search's status document, started by `owner` (None: anonymously)."""
    return TaskView(**dict(pending_task(task_id, owner, utcnow())))


def hits(prefix: str, n: int, *, host: str = "example.com") -> list[Hit]:
    return [
        Hit(title=f"{prefix} {i}", url=f"https://{host}/{prefix}/{i}", snippet=f"{prefix} text {i}")
        for i in range(1, n + 1)
    ]


class FakePlatform(Platform[PlatformSettings]):
    """Answers each query with `results(query)`, or raises `error`, after `delay` seconds."""

    settings_model = PlatformSettings

    def __init__(
        self,
        name: str,
        results: Callable[[str], list[Hit]] | list[Hit] | None = None,
        *,
        error: Exception | None = None,
        delay: float = 0.0,
        barrier: asyncio.Barrier | None = None,
        gate: asyncio.Event | None = None,
        overrides: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(name, overrides)
        self._results = results if results is not None else hits(name, 5)
        self.error, self.delay, self.barrier, self.gate = error, delay, barrier, gate
        self.calls = 0
        self.params: list[SearchParams] = []

    async def search(
        self, ctx: PlatformContext[PlatformSettings], params: SearchParams
    ) -> list[list[Hit]]:
        self.calls += 1
        self.params.append(params)
        if self.barrier is not None:
            await asyncio.wait_for(self.barrier.wait(), timeout=10)
        if self.gate is not None:
            await self.gate.wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        out = []
        for q in params.queries:
            found = self._results(q) if callable(self._results) else self._results
            out.append(list(found))
        return out


class ContentFakePlatform(FakePlatform):
    """A FakePlatform whose hits carry their page content, so a search that asks for content
    fetches nothing (a fake's example.com URLs must never be fetched)."""

    capabilities = Capabilities(content=True)


class NoQueue(TaskQueue):
    """For requests that must be refused: enqueuing anything fails the test."""

    def enqueue_platform(self, message: Any) -> None:
        raise AssertionError("nothing may be enqueued for a bad request")

    def enqueue_aggregate(self, message: Any, at: Any = None) -> None:
        raise AssertionError("nothing may be enqueued for a bad request")


class HeldQueue(TaskQueue):
    """Keeps every message and runs nothing: its searches stay in flight, unless the test
    delivers the platform messages itself."""

    def __init__(self) -> None:
        self.platforms: list[PlatformMessage] = []
        self.aggregates: list[Any] = []

    @property
    def messages(self) -> int:
        return len(self.platforms) + len(self.aggregates)

    def enqueue_platform(self, message: PlatformMessage) -> None:
        self.platforms.append(message)

    def enqueue_aggregate(self, message: Any, at: Any = None) -> None:
        self.aggregates.append(message)


class Clock:
    """A clock a test moves by hand (`clock.now += ...`), from `start`."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now
