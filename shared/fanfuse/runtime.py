"""The embedded runtime: the service on SQLite and an in-process queue, in one asyncio process.

It needs nothing installed beyond the package. On start it purges expired tasks and resumes
searches a previous process left unfinished (their platforms re-run; the deadline still holds).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType
from typing import Any

from fanfuse.models import TaskView, utcnow
from fanfuse.net.runner import Runner
from fanfuse.platforms import Registry
from fanfuse.polling import until_terminal
from fanfuse.queue.base import PlatformMessage
from fanfuse.queue.inprocess import InProcessQueue, Message
from fanfuse.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.base import TaskStore
from fanfuse.store.sqlite import SqliteStore


class EmbeddedRuntime:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        registry: Registry | None = None,
        store: TaskStore | None = None,
        runner: Runner | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.registry = registry or Registry.from_settings(self.settings)
        self._store = store
        self._runner = runner
        self._queue: InProcessQueue | None = None
        self._service: SearchService | None = None

    @property
    def service(self) -> SearchService:
        if self._service is None:
            raise RuntimeError("use `async with EmbeddedRuntime(...)`")
        return self._service

    async def __aenter__(self) -> EmbeddedRuntime:
        store = self._store or SqliteStore(self.settings.db_path)
        self._queue = InProcessQueue(asyncio.get_running_loop(), self._deliver)
        self._service = SearchService(
            store, self._queue, self.registry, self.settings, runner=self._runner
        )
        store.purge_expired(utcnow())
        self._service.resume_unfinished()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._queue is not None:
            self._queue.close()
        if self._service is not None:
            self._service.store.close()

    async def _deliver(self, message: Message) -> None:
        if isinstance(message, PlatformMessage):
            await self.service.run_platform(message)
        else:
            await self.service.aggregate(message)

    async def wait(
        self,
        task_id: str,
        on_update: Callable[[TaskView], None] | None = None,
        poll: float = 0.1,
    ) -> TaskView:
        """Poll like an app would, until the task is terminal."""

        async def fetch() -> TaskView:
            return self.service.status(task_id)

        return await until_terminal(fetch, interval=poll, on_update=on_update)

    async def search(
        self, payload: Any, on_update: Callable[[TaskView], None] | None = None
    ) -> TaskView:
        accepted = self.service.start(payload)
        return await self.wait(accepted.task_id, on_update)
