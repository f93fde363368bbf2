"""The embedded runtime: the service on SQLite and an in-process queue, in one asyncio process.

It needs nothing installed beyond the package. On start it purges expired tasks. A resident
runtime (`fanfuse serve`, `fanfuse mcp`: `resident=True`) also resumes the searches it started
itself before a restart: its id is kept in a file beside the database (`resident_id`), and the
store marks each search it creates with it. A CLI or library runtime resumes nothing, so a search
nobody waits for any more is never sent to the providers again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from fanfuse.net.runner import Runner
from fanfuse.platforms import Registry
from fanfuse.queue.inprocess import InProcessQueue, Message
from fanfuse.queue.port import PlatformMessage
from fanfuse.service.polling import until_terminal
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings, get_settings
from fanfuse.settings.content import ContentSettings
from fanfuse.settings.rerank import LlmRerankSettings
from fanfuse.store.ports import TaskStore
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tracing import setup as tracing
from fanfuse.wire.models import Accepted, SearchRequest, TaskView, utcnow


class EmbeddedRuntime:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        registry: Registry | None = None,
        store: TaskStore | None = None,
        runner: Runner | None = None,
        resident: bool = False,
        content: ContentSettings | None = None,
        rerank: LlmRerankSettings | None = None,
    ) -> None:
        """A composition root: its service runs on `settings` (default: the process's settings
        tree, `get_settings`) and its sections unless `content` or `rerank` are given
        (platforms' settings: read through the tree once per platform of `registry`)."""
        self.settings = settings or get_settings()
        tracing.configure()  # on when OTEL_* says so (fanfuse/tracing/setup.py)
        self.content = content or self.settings.content
        self.rerank = rerank or self.settings.rerank_llm
        self.resident = resident
        self.registry = registry or Registry.from_settings(self.settings)
        self._store = store
        self._runner = runner
        self._queue: InProcessQueue | None = None
        self._service: SearchService | None = None
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}

    @property
    def service(self) -> SearchService:
        if self._service is None:
            raise RuntimeError("use `async with EmbeddedRuntime(...)`")
        return self._service

    async def __aenter__(self) -> EmbeddedRuntime:
        path = self.settings.db_path
        store = self._store or SqliteStore(
            path, resident=resident_id(path) if self.resident else None
        )
        self._queue = InProcessQueue(asyncio.get_running_loop(), self._deliver)
        self._service = SearchService(
            store,
            self._queue,
            self.registry,
            self.settings,
            runner=self._runner,
            content=self.content,
            rerank=self.rerank,
        )
        store.purge_expired(utcnow())
        if self.resident:
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
            await self._queue.drain()
        if self._service is not None:
            self._service.store.close()
        tracing.flush()

    async def _deliver(self, message: Message) -> None:
        try:
            if isinstance(message, PlatformMessage):
                await self.service.run_platform(message)
            else:
                await self.service.aggregate(message)
        finally:
            self._nudge(message.task_id)

    def _nudge(self, task_id: str) -> None:
        """Wake whoever awaits `delivered(task_id)`: a delivery of that task just ended."""
        for waiter in self._waiters.pop(task_id, []):
            if not waiter.done():
                waiter.set_result(None)

    async def delivered(self, task_id: str, at_most: float) -> None:
        """Return when a delivery of this task (a platform run, the aggregate) ends, or after
        `at_most` seconds, whichever is first.

        Every step that can finalize a search in this process is a delivery, so a waiter that
        reads the task's status after each one learns of its end at once, without polling the
        store many times a second (a server with many waiting searches). `at_most` covers
        what no delivery does (a cancel, another process's write): then read anyway.
        """
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(task_id, []).append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), at_most)
        except TimeoutError:
            pass
        finally:
            waiters = self._waiters.get(task_id)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self._waiters[task_id]

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

    def start(self, request: RequestLike = None, /, **fields: Any) -> Accepted:
        """Start a search and return at once; `wait`, `status` and `cancel` take its task id."""
        return self.service.start(request_payload(request, fields))

    def status(self, task_id: str) -> TaskView:
        return self.service.status(task_id)

    def cancel(self, task_id: str) -> TaskView:
        return self.service.cancel(task_id)

    async def search(
        self,
        request: RequestLike = None,
        /,
        *,
        on_update: Callable[[TaskView], None] | None = None,
        **fields: Any,
    ) -> TaskView:
        """Run one search to its end: `search("laser", platform="docs")`, a SearchRequest, or
        a request body as a dict (fields given by keyword replace its own)."""
        accepted = self.start(request, **fields)
        try:
            return await self.wait(accepted.task_id, on_update)
        except asyncio.CancelledError:  # Ctrl-C under asyncio.run, or a caller's cancel
            self.cancel(accepted.task_id)
            raise


def resident_id(db_path: Path) -> str:
    """The id of the resident process on `db_path`, kept in `<db>.runner` so that it survives
    a restart: the searches marked with it are the ones that process resumes (store.recoverable).
    """
    if str(db_path) == ":memory:":  # nothing survives the process: nothing to resume
        return uuid.uuid4().hex
    path = Path(f"{db_path}.runner")
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        made = uuid.uuid4().hex
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(made, encoding="utf-8")
        return made


RequestLike = SearchRequest | Mapping[str, Any] | str | Sequence[str] | None
"""A request as the Python API takes it: the model, its JSON body, or just the query."""


def request_payload(request: RequestLike, fields: Mapping[str, Any]) -> dict[str, Any]:
    """One request body from the forms `RequestLike` allows plus keyword fields. Validation is
    left to the service, so a bad value gets the HTTP API's message, naming the field."""
    if isinstance(request, SearchRequest):
        payload = request.model_dump(exclude_unset=True)  # what the caller said, no more
    elif isinstance(request, Mapping):
        payload = dict(request)
    elif request is None:
        payload = {}
    else:
        payload = {"query": request if isinstance(request, str) else list(request)}
    return {**payload, **fields}


def search(request: RequestLike = None, /, **fields: Any) -> TaskView:
    """Run one search in a fresh embedded runtime and return the final task document.

    Synchronous, for scripts and notebooks without an event loop; inside one (or for many
    searches, which then share loaded models and indexes), use `async with Runtime()`.
    Runtime settings come from the settings tree (`get_settings()`, `FANFUSE_*`); `settings=`
    overrides them.
    """
    settings = fields.pop("settings", None)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "fanfuse.search() runs its own event loop; inside a running one use "
            "`async with fanfuse.Runtime() as rt: await rt.search(...)`"
        )

    async def run() -> TaskView:
        async with EmbeddedRuntime(settings) as runtime:
            return await runtime.search(request, **fields)

    return asyncio.run(run())
