"""The port the MCP tools call: start, status, cancel and list platforms, on either runtime.

The tools are written once against `SearchBackend`; `EmbeddedBackend` runs the service in this
process (SQLite, in-process queue), `RemoteBackend` calls a deployed stack's HTTP API through
`HttpSearchClient`. Every call names the caller it acts for (fronts/mcp/access.py): the embedded
backend makes it the owner of what it starts and shows and cancels nothing of another owner (404,
as the API answers); the remote one is used only unauthenticated on loopback, where the one
caller is the local user, and the stack checks its own key. Both raise FanfuseError with the
HTTP API's message (a bad field is an InvalidRequest or a 400 ApiError naming it), which the
tools return as a tool error.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import httpx
from pydantic import BaseModel, Field

from fanfuse.auth.callers import visible_status
from fanfuse.http.client import HttpSearchClient, api_http
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.errors import TaskNotFound
from fanfuse.wire.models import Accepted, Caller, PlatformInfo, TaskView

REMEMBERED = 1000
"""Searches a remote backend keeps the URLs of: the API has no URL to derive from a task id."""


class Platforms(BaseModel):
    """`list_platforms`' structured answer."""

    platforms: list[PlatformInfo]
    note: str | None = Field(default=None, description="what this list cannot say")


class SearchBackend(Protocol):
    poll: float
    """Seconds between status reads while a tool waits for a search."""

    async def start(self, payload: dict[str, Any], caller: Caller) -> Accepted: ...

    async def status(self, task_id: str, caller: Caller) -> TaskView: ...

    async def cancel(self, task_id: str, caller: Caller) -> TaskView: ...

    async def platforms(self) -> Platforms: ...


class EmbeddedBackend:
    """The service in this process: the same validation, documents and messages as the API."""

    def __init__(self, runtime: EmbeddedRuntime, poll: float = 0.1) -> None:
        self.runtime = runtime
        self.poll = poll

    async def start(self, payload: dict[str, Any], caller: Caller) -> Accepted:
        return self.runtime.service.start(payload, caller=caller)

    async def status(self, task_id: str, caller: Caller) -> TaskView:
        return visible_status(self.runtime.service.status, task_id, caller)

    async def cancel(self, task_id: str, caller: Caller) -> TaskView:
        visible_status(self.runtime.service.status, task_id, caller)  # 404/410 before a write
        return self.runtime.service.cancel(task_id)

    async def platforms(self) -> Platforms:
        return Platforms(platforms=self.runtime.service.platforms())


class RemoteBackend:
    """A deployed (or `fanfuse dev`) stack, through its `start_search` URL.

    The API answers a start with the search's `status_url` and `cancel_url`; they are kept per
    task id (the last REMEMBERED searches this server started), so `get_search_status` can take
    just the id. A search started elsewhere is unknown here.
    """

    def __init__(self, client: HttpSearchClient) -> None:
        self.client = client
        self.poll = client.poll
        self._accepted: OrderedDict[str, Accepted] = OrderedDict()

    async def start(self, payload: dict[str, Any], caller: Caller) -> Accepted:
        accepted = await self.client.start(payload)
        self._accepted[accepted.task_id] = accepted
        while len(self._accepted) > REMEMBERED:
            self._accepted.popitem(last=False)
        return accepted

    def _known(self, task_id: str) -> Accepted:
        try:
            return self._accepted[task_id]
        except KeyError:
            raise TaskNotFound(task_id) from None

    async def status(self, task_id: str, caller: Caller) -> TaskView:
        return await self.client.status(self._known(task_id))

    async def cancel(self, task_id: str, caller: Caller) -> TaskView:
        return await self.client.cancel(self._known(task_id))

    async def platforms(self) -> Platforms:
        return Platforms(
            platforms=[],
            note=f"searches go to {self.client.endpoint}, whose API does not list its "
            'platforms: use platform "all", or a name (an unknown one is refused with the '
            "list of available ones)",
        )


@asynccontextmanager
async def open_backend(
    endpoint: str | None, settings: Settings | None = None, auth: httpx.Auth | None = None
) -> AsyncIterator[SearchBackend]:
    """The remote backend when `endpoint` is given (one connection pool, `auth` sent with
    every call: `fanfuse.auth.outbound`), else the embedded one (in process: no credential).

    The embedded one is resident: it resumes the searches a previous MCP process on the same
    database started and left unfinished, while they are within their deadline (runtime.py).
    """
    if endpoint:
        async with api_http(30.0) as http:
            yield RemoteBackend(HttpSearchClient(endpoint, http=http, auth=auth))
        return
    async with EmbeddedRuntime(settings, resident=True) as runtime:
        yield EmbeddedBackend(runtime)
