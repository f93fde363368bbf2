"""Waiting on one search, always bounded: the sync cap of `POST /search` and the event stream.

Both wait at most until the search's own deadline (its `timeout_s`, else the deployment's) plus
`GRACE`. The deadline aggregate finalizes a search a quarter second after its deadline, so a
search that is still not terminal then is stuck (a store failure), and the caller gets what
there is instead of a connection held forever: `/search` answers 202 with the running document,
the stream ends with a `timeout` event.

The runtime's store is read in process (one SQLite read of the task and its platforms), so a
short poll costs little and adds at most `POLL` to a search's answer time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from sse_starlette import ServerSentEvent

from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.wire.errors import FanfuseError
from fanfuse.wire.models import TaskView, utcnow

GRACE = 5.0
"""Seconds past a search's deadline that a waiter still waits for its final document."""
POLL = 0.02
"""Seconds between two in-process status reads while `/search` waits."""
EVENT_POLL = 0.1
"""Seconds between two status reads of an event stream (an event is sent only on a change)."""


def cap(runtime: EmbeddedRuntime, view: TaskView) -> float:
    """Seconds to wait for `view`'s search: to its deadline, at most the deployment's, + GRACE."""
    remaining = (view.deadline_at - utcnow()).total_seconds()
    return max(0.0, min(remaining, runtime.settings.deadline_seconds)) + GRACE


async def settle(runtime: EmbeddedRuntime, task_id: str) -> TaskView:
    """The terminal document, or the current one when the cap passes first."""
    service = runtime.service
    try:
        async with asyncio.timeout(cap(runtime, service.status(task_id))):
            return await runtime.wait(task_id, poll=POLL)
    except TimeoutError:
        return service.status(task_id)


async def events(
    runtime: EmbeddedRuntime, task_id: str, poll: float = EVENT_POLL
) -> AsyncIterator[ServerSentEvent]:
    """`progress` on each change of the document, then `done` (terminal) or `timeout` (the cap
    passed), each with the TaskView as JSON; then the stream ends."""
    service = runtime.service
    last = ""
    number = 0
    give_up: float | None = None
    while True:
        try:
            view = service.status(task_id)
        except FanfuseError as exc:  # the search vanished under the stream (purged)
            yield ServerSentEvent(exc.body().model_dump_json(), event="error", id=str(number))
            return
        if give_up is None:
            give_up = time.monotonic() + cap(runtime, view)
        data = view.model_dump_json()
        if view.status.terminal:
            yield ServerSentEvent(data, event="done", id=str(number))
            return
        if time.monotonic() >= give_up:
            yield ServerSentEvent(data, event="timeout", id=str(number))
            return
        if data != last:
            yield ServerSentEvent(data, event="progress", id=str(number))
            number += 1
            last = data
        await asyncio.sleep(poll)
