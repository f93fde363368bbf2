"""One way to reach either runtime: start, status, cancel, run one search to its end, and list
platforms, in this process or on a deployed stack.

The MCP tools (`fronts/mcp`) and the command line (`fanfuse search [--endpoint]`, `cli/main.py`)
are written once against `SearchBackend`; `open_backend` picks the runtime. `EmbeddedBackend` runs
the service in this process (SQLite, in-process queue), `RemoteBackend` calls a deployed stack's
HTTP API through `HttpSearchClient`. It lives on the client side, beside that client: it uses the
runtimes (the embedded one, or a stack through its API) and no runtime uses it, so `runtimes`
imports nothing of `http`. Every call names the caller it acts for
(fronts/mcp/access.py; the command line's own searches have none, as a `fanfuse.search()` call):
the embedded backend makes it the owner of what it starts and shows and cancels nothing of
another owner (404, as the API answers); the remote one is used by the MCP server only
unauthenticated on loopback, where the one caller is the local user, and the stack checks its own
key. Both raise FanfuseError with the HTTP API's message (a bad field is an InvalidRequest or a
400 ApiError naming it), which the tools return as a tool error and the command line prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import httpx
from pydantic import BaseModel, Field

from fanfuse.auth.callers import visible_status
from fanfuse.http.client import HttpSearchClient, api_http
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.errors import TaskNotFound
from fanfuse.wire.models import Accepted, Caller, PlatformInfo, TaskView

CANCEL_TIMEOUT_S = 5.0
"""How long a remote search's cancel may take when its waiter is cancelled (Ctrl-C): best
effort, so that the exit never hangs on an unreachable stack."""
OnUpdate = Callable[[TaskView], None] | None
"""Called with each status read while a search runs (the command line's progress bars)."""

REMEMBERED = 1000
"""Searches a remote backend keeps the URLs of: the API has no URL to derive from a task id."""


class Platforms(BaseModel):
    """`list_platforms`' structured answer."""

    platforms: list[PlatformInfo]
    note: str | None = Field(default=None, description="what this list cannot say")


class SearchBackend(Protocol):
    poll: float
    """Seconds between status reads while a tool waits for a search."""

    async def start(self, payload: dict[str, Any], caller: Caller | None) -> Accepted: ...

    async def status(self, task_id: str, caller: Caller | None) -> TaskView: ...

    async def cancel(self, task_id: str, caller: Caller | None) -> TaskView: ...

    async def search(
        self, payload: dict[str, Any], caller: Caller | None, on_update: OnUpdate = None
    ) -> TaskView:
        """Start a search and wait for its end; cancelled with it if the wait is (Ctrl-C)."""
        ...

    async def platforms(self) -> Platforms: ...


EMBEDDED_POLL = 0.05
"""Seconds between two status reads of a search in this process (one local SQLite read each):
short, so that a preview is shown soon after it exists (issue 22: within 0.3 s of the start,
with the quickest platform answering at 0.2 s)."""


class EmbeddedBackend:
    """The service in this process: the same validation, documents and messages as the API."""

    def __init__(self, runtime: EmbeddedRuntime, poll: float = EMBEDDED_POLL) -> None:
        self.runtime = runtime
        self.poll = poll

    async def start(self, payload: dict[str, Any], caller: Caller | None) -> Accepted:
        return self.runtime.service.start(payload, caller=caller)

    async def status(self, task_id: str, caller: Caller | None) -> TaskView:
        return visible_status(self.runtime.service.status, task_id, caller)

    async def cancel(self, task_id: str, caller: Caller | None) -> TaskView:
        visible_status(self.runtime.service.status, task_id, caller)  # 404/410 before a write
        return self.runtime.service.cancel(task_id)

    async def search(
        self, payload: dict[str, Any], caller: Caller | None, on_update: OnUpdate = None
    ) -> TaskView:
        accepted = await self.start(payload, caller)
        try:
            return await self.runtime.wait(accepted.task_id, on_update, poll=self.poll)
        except asyncio.CancelledError:  # Ctrl-C under asyncio.run, or a caller's cancel
            self.runtime.service.cancel(accepted.task_id)
            raise

    async def platforms(self) -> Platforms:
        return Platforms(platforms=self.runtime.service.platforms())


class Remembered:
    """A remote backend's start answers in a SQLite file (`<cache_dir>/remote-searches.db`), per
    endpoint, the last REMEMBERED: the API gives a search's `status_url` and `cancel_url` only
    when it starts it, so a restarted `fanfuse mcp --endpoint` reads them here to keep serving
    the MCP tasks (fronts/mcp/tasks.py) its previous process started. Only the local user's
    server fronts a remote stack (fronts/mcp/transports.py refuses an authenticating one), and the
    stack checks its own key on every call. One short connection per call: rare, small writes."""

    def __init__(self, path: Path, endpoint: str) -> None:
        self.path = path
        self.endpoint = endpoint
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.closing(self._connect()) as db, db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS accepted (endpoint TEXT NOT NULL, "
                "task_id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (endpoint, task_id))"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10)

    def put(self, accepted: Accepted) -> None:
        with contextlib.closing(self._connect()) as db, db:
            db.execute(
                "INSERT OR REPLACE INTO accepted VALUES (?, ?, ?)",
                (self.endpoint, accepted.task_id, accepted.model_dump_json()),
            )
            db.execute(
                "DELETE FROM accepted WHERE endpoint = ? AND rowid NOT IN (SELECT rowid FROM "
                "accepted WHERE endpoint = ? ORDER BY rowid DESC LIMIT ?)",
                (self.endpoint, self.endpoint, REMEMBERED),
            )

    def get(self, task_id: str) -> Accepted | None:
        with contextlib.closing(self._connect()) as db:
            row = db.execute(
                "SELECT body FROM accepted WHERE endpoint = ? AND task_id = ?",
                (self.endpoint, task_id),
            ).fetchone()
        return Accepted.model_validate_json(row[0]) if row else None


class RemoteBackend:
    """A deployed (or `fanfuse dev`) stack, through its `start_search` URL.

    The API answers a start with the search's `status_url` and `cancel_url`; they are kept per
    task id (the last REMEMBERED searches this server started, and in `remembered` when given,
    which outlives the process), so `get_search_status` can take just the id. A search started
    elsewhere is unknown here.
    """

    def __init__(self, client: HttpSearchClient, remembered: Remembered | None = None) -> None:
        self.client = client
        self.poll = client.poll
        self.remembered = remembered
        self._accepted: OrderedDict[str, Accepted] = OrderedDict()

    async def start(self, payload: dict[str, Any], caller: Caller | None) -> Accepted:
        accepted = await self.client.start(payload)
        self._accepted[accepted.task_id] = accepted
        while len(self._accepted) > REMEMBERED:
            self._accepted.popitem(last=False)
        if self.remembered is not None:
            await asyncio.to_thread(self.remembered.put, accepted)
        return accepted

    async def _known(self, task_id: str) -> Accepted:
        found = self._accepted.get(task_id)
        if found is None and self.remembered is not None:
            found = await asyncio.to_thread(self.remembered.get, task_id)
        if found is None:
            raise TaskNotFound(task_id)
        return found

    async def status(self, task_id: str, caller: Caller | None) -> TaskView:
        return await self.client.status(await self._known(task_id))

    async def cancel(self, task_id: str, caller: Caller | None) -> TaskView:
        return await self.client.cancel(await self._known(task_id))

    async def search(
        self, payload: dict[str, Any], caller: Caller | None, on_update: OnUpdate = None
    ) -> TaskView:
        accepted = await self.start(payload, caller)
        try:
            return await self.client.wait(accepted, on_update)
        except asyncio.CancelledError:  # Ctrl-C: asyncio.run cancels the waiting coroutine
            with contextlib.suppress(Exception):  # best effort: the exit must not hang
                await asyncio.wait_for(self.client.cancel(accepted), CANCEL_TIMEOUT_S)
            raise

    async def platforms(self) -> Platforms:
        return Platforms(
            platforms=[],
            note=f"searches go to {self.client.endpoint}, whose API does not list its "
            'platforms: use platform "all", or a name (an unknown one is refused with the '
            "list of available ones)",
        )


@asynccontextmanager
async def open_backend(
    endpoint: str | None,
    settings: Settings | None = None,
    auth: httpx.Auth | None = None,
    *,
    resident: bool = True,
) -> AsyncIterator[SearchBackend]:
    """The remote backend when `endpoint` is given (one connection pool, `auth` sent with
    every call: `fanfuse.auth.outbound`), else the embedded one (in process: no credential).

    A resident embedded one (the MCP server's) resumes the searches a previous process on the
    same database started and left unfinished, while they are within their deadline
    (`runtimes/embedded.py`); the command line's is not: it runs its one search and exits. A
    resident remote one (given `settings`) remembers its searches' URLs in the cache directory
    (`Remembered`), so a restarted MCP server still reaches them.
    """
    if endpoint:
        remembered = None
        if resident and settings is not None:
            remembered = Remembered(settings.cache_dir / "remote-searches.db", endpoint)
        async with api_http(30.0) as http:
            yield RemoteBackend(HttpSearchClient(endpoint, http=http, auth=auth), remembered)
        return
    async with EmbeddedRuntime(settings, resident=resident) as runtime:
        yield EmbeddedBackend(runtime)
