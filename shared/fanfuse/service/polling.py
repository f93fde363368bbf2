"""Poll a search until it is terminal: the one loop the runtime, the HTTP client and the bench use.

Apps poll too (the task document or the status endpoint); this is how fanfuse's own callers do
it, so a change to how often or how long is made once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from fanfuse.wire.models import TaskView

Fetch = Callable[[], Awaitable[TaskView]]
OnUpdate = Callable[[TaskView], None]


async def until_terminal(
    fetch: Fetch,
    *,
    interval: float,
    on_update: OnUpdate | None = None,
) -> TaskView:
    """`fetch()` every `interval` seconds until the task is terminal; the last view.

    Unbounded on purpose: the search has a deadline of its own; a caller that wants to wait
    less wraps this in `asyncio.timeout`.
    """
    while True:
        view = await fetch()
        if on_update is not None:
            on_update(view)
        if view.status.terminal:
            return view
        await asyncio.sleep(interval)
