"""The embedded TaskQueue: asyncio tasks on the running loop instead of Cloud Tasks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from fanfuse.errors import LeaseHeld
from fanfuse.models import utcnow
from fanfuse.queue.base import AggregateMessage, PlatformMessage, TaskQueue, task_name

log = logging.getLogger(__name__)

Message = PlatformMessage | AggregateMessage
Handler = Callable[[Message], Awaitable[None]]


class InProcessQueue(TaskQueue):
    """Runs every platform of a search concurrently; names dedupe like Cloud Tasks names do."""

    def __init__(self, loop: asyncio.AbstractEventLoop, handler: Handler) -> None:
        self._loop = loop
        self._handler = handler
        self._names: set[str] = set()
        self._running: set[asyncio.Task[None]] = set()
        self._timers: set[asyncio.TimerHandle] = set()

    def enqueue_platform(self, message: PlatformMessage) -> None:
        self._submit(task_name(message.task_id, message.platform), message, None)

    def enqueue_aggregate(self, message: AggregateMessage, at: datetime | None = None) -> None:
        suffix = "deadline" if message.deadline else "aggregate"
        self._submit(task_name(message.task_id, suffix), message, at)

    def _submit(self, name: str, message: Message, at: datetime | None) -> None:
        if name in self._names:
            return
        self._names.add(name)
        delay = max(0.0, (at - utcnow()).total_seconds()) if at else 0.0
        self._loop.call_soon_threadsafe(self._schedule, message, delay)

    def _schedule(self, message: Message, delay: float) -> None:
        if delay > 0:
            timer = self._loop.call_later(delay, self._spawn, message)
            self._timers.add(timer)
        else:
            self._spawn(message)

    def _spawn(self, message: Message) -> None:
        task = self._loop.create_task(self._deliver(message))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _deliver(self, message: Message) -> None:
        try:
            await self._handler(message)
        except LeaseHeld as exc:
            # Another delivery (a previous process's, before a restart) holds the run: try again
            # once its lease may have lapsed, as Cloud Tasks does on the 503's Retry-After.
            log.info("%s: %s; retrying in %.1f s", message, exc, exc.retry_after_s)
            self._schedule(message, exc.retry_after_s)
        except Exception:  # a cloud queue would retry; here the deadline finalizes instead
            log.exception("delivery of %s failed", message)

    def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
        for task in self._running:
            task.cancel()

    async def drain(self) -> None:
        """Wait until the deliveries `close` cancelled have unwound: a cancelled platform run
        releases its lease in the store (service.run_platform), which must still be open."""
        await asyncio.gather(*self._running, return_exceptions=True)
