"""The embedded TaskQueue: asyncio tasks on the running loop instead of Cloud Tasks.

Names dedupe as Cloud Tasks names do, for as long as it matters: a name is held from its enqueue
until its delivery has run (through its timer, if it was delayed, and any LeaseHeld retries), so a
second enqueue meanwhile is a duplicate. Once it has run the name is forgotten, and so is its
timer: a `fanfuse serve` that runs for months keeps only what is still to come. A later enqueue of
the same name is then a second delivery, which the store makes harmless (a terminal platform run
is not claimed again, a finalized task is not finalized again: lifecycle.py), as Cloud Tasks'
at-least-once delivery needs anyway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from fanfuse.queue.port import AggregateMessage, PlatformMessage, TaskQueue, task_name
from fanfuse.tracing import delivery
from fanfuse.wire.errors import LeaseHeld
from fanfuse.wire.models import utcnow

log = logging.getLogger(__name__)

Message = PlatformMessage | AggregateMessage
Handler = Callable[[Message], Awaitable[None]]


class InProcessQueue(TaskQueue):
    """Runs every platform of a search concurrently; names dedupe like Cloud Tasks names do."""

    def __init__(self, loop: asyncio.AbstractEventLoop, handler: Handler) -> None:
        self._loop = loop
        self._handler = handler
        self._names: set[str] = set()
        """The names enqueued and not yet run: pending, waiting on a timer, or running."""
        self._running: set[asyncio.Task[None]] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        """The delayed deliveries still to fire, by name (so `close` can cancel them)."""
        self._carriers: dict[str, dict[str, str]] = {}
        """What each held name's delivery carries besides its message (tracing/delivery.py)."""

    def enqueue_platform(self, message: PlatformMessage) -> None:
        self._submit(task_name(message.task_id, message.suffix), message, None)

    def enqueue_aggregate(self, message: AggregateMessage, at: datetime | None = None) -> None:
        suffix = "deadline" if message.deadline else "aggregate"
        self._submit(task_name(message.task_id, suffix), message, at)

    def _submit(self, name: str, message: Message, at: datetime | None) -> None:
        if name in self._names:
            return
        self._names.add(name)
        target = "aggregate" if isinstance(message, AggregateMessage) else "run_platform"
        self._carriers[name] = delivery.outbound(target, getattr(message, "platform", None))
        delay = max(0.0, (at - utcnow()).total_seconds()) if at else 0.0
        self._loop.call_soon_threadsafe(self._schedule, name, message, delay)

    def _schedule(self, name: str, message: Message, delay: float) -> None:
        if delay > 0:
            self._timers[name] = self._loop.call_later(delay, self._fire, name, message)
        else:
            self._spawn(name, message)

    def _fire(self, name: str, message: Message) -> None:
        del self._timers[name]
        self._spawn(name, message)

    def _spawn(self, name: str, message: Message) -> None:
        task = self._loop.create_task(self._deliver(name, message))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _deliver(self, name: str, message: Message) -> None:
        target = "aggregate" if isinstance(message, AggregateMessage) else "run_platform"
        try:
            with delivery.inbound(self._carriers.get(name), target):
                await self._handler(message)
        except LeaseHeld as exc:
            # Another delivery (a previous process's, before a restart) holds the run: try again
            # once its lease may have lapsed, as Cloud Tasks does on the 503's Retry-After. The
            # name stays held: this delivery is still to come.
            log.info("%s: %s; retrying in %.1f s", message, exc, exc.retry_after_s)
            self._schedule(name, message, exc.retry_after_s)
            return
        except Exception:  # a cloud queue would retry; here the deadline finalizes instead
            log.exception("delivery of %s failed", message)
        self._names.discard(name)
        self._carriers.pop(name, None)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        for task in self._running:
            task.cancel()

    async def drain(self) -> None:
        """Wait until the deliveries `close` cancelled have unwound: a cancelled platform run
        releases its lease in the store (service.run_platform), which must still be open."""
        await asyncio.gather(*self._running, return_exceptions=True)
