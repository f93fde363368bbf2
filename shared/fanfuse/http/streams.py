"""Streams of one search's changes: one watcher per search, shared by all its streams, and a cap on
the streams one caller holds open.

Why. A stream used to poll on its own: `fanfuse serve`'s event stream read and merged the whole
search (the task, every platform document, the preview fused from them) every 100 ms, and MCP's
`subscriptions/listen` read each of its up to 100 tasks every 250 ms. Cost grew with the number
of streams, all of it on the event loop, and a caller could open as many as it liked: 150 streams
of one key on its own running search took `/openapi.json` from milliseconds to seconds for every
other caller (issue 29). Now:

- `Watchers` keeps one `SearchWatch` per search that anyone watches, whatever the number of
  streams on it and whatever front they came through (serve's event streams and MCP's listen
  streams each hold the `Watchers` of their process). Its one poller reads a cheap change
  marker each interval (`TaskDocuments.change_marker`: on SQLite the status and the documents'
  `updated_at`, one indexed query, no JSON model built), and only when it moved reads the
  merged view, once, serializes it once, and publishes it as a `Snapshot` that every stream
  reads (what a stream sends of a snapshot is made once too: `Snapshot.derive`). A source with
  no marker (a remote stack, reached over HTTP) is read once per interval, still once for all.
- The watcher stops when its last stream closes, and after publishing a terminal or vanished
  search (nothing more can change); a later stream starts it again.
- `StreamCap`: a caller (by subject: every key of one owner is one caller) holds at most
  `Settings.max_streams_per_caller` streams at once; one more is `TooManyStreams`, a 429 with
  `Retry-After`, before anything is read. Streams end with their search (its deadline, plus a
  few seconds, at the latest), so the wait is short.

Nothing here is tied to a framework or a transport: the fronts turn snapshots into Server-Sent
Events (fronts/serve/watch.py) or MCP notifications (fronts/mcp/tasks.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fanfuse.service.service import SearchService
from fanfuse.wire.errors import FanfuseError, TooManyStreams
from fanfuse.wire.models import Caller, TaskView

log = logging.getLogger(__name__)

INTERVAL = 0.1
"""Seconds between two reads of a watched search's change marker."""
STREAM_RETRY_AFTER_S = 5.0
"""The `Retry-After` of a stream past the cap: a stream ends with its search, most within
seconds, every one by its deadline."""

Read = Callable[[str], Awaitable[TaskView]]
"""The merged view of a search (TaskNotFound, TaskExpired: it is gone)."""
Marker = Callable[[str], str | None]
"""Something that changes whenever the search's documents do; None: nothing cheaper than the
view is known (read the view)."""
T = TypeVar("T")


@dataclass
class Snapshot:
    """One state of a watched search, as every stream on it receives it: the view and its JSON,
    or the error that ended it (the search vanished: 404, or expired: 410)."""

    version: int
    view: TaskView | None
    data: str
    """The view's JSON (or the error's body), serialized once for every stream."""
    error: FanfuseError | None = None
    _derived: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def over(self) -> bool:
        """Nothing more will change: the search is terminal, or gone."""
        return self.error is not None or (self.view is not None and self.view.status.terminal)

    def derive(self, name: str, make: Callable[[], T]) -> T:
        """`make()` once per snapshot, under `name`: what each stream sends of this state (an
        encoded event, a notification) is made for the first stream and reused by the others."""
        if name not in self._derived:
            self._derived[name] = make()
        found: T = self._derived[name]
        return found


class SearchWatch:
    """One search's poller and its latest snapshot; streams wait on `next`."""

    def __init__(self, task_id: str, read: Read, marker: Marker, interval: float) -> None:
        self.task_id = task_id
        self._read = read
        self._marker = marker
        self._interval = interval
        self.latest: Snapshot | None = None
        self.streams = 0
        self.reads = 0
        """Views read (merges): what the marker saves is the polls minus these."""
        self._changed = asyncio.Event()
        self._versions = itertools.count(1)
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if not self.running and not (self.latest is not None and self.latest.over):
            self._task = asyncio.create_task(self._poll(), name=f"watch {self.task_id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def next(self, after: int) -> Snapshot:
        """The first snapshot newer than version `after` (the latest, when several passed)."""
        while self.latest is None or self.latest.version <= after:
            changed = self._changed
            await changed.wait()
        return self.latest

    def _publish(self, snapshot: Snapshot) -> None:
        self.latest = snapshot
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _poll(self) -> None:
        seen: str | None = None
        while True:  # until the search is over, or the last stream leaves (stop)
            try:
                marker = self._marker(self.task_id)
                if marker is None or marker != seen or self.latest is None:
                    self.reads += 1
                    await self._publish_view()
                    seen = marker
            except Exception:  # a store that failed this time: read again next interval
                log.exception("watching %s failed; retrying", self.task_id)
            if self.latest is not None and self.latest.over:
                return
            await asyncio.sleep(self._interval)

    async def _publish_view(self) -> None:
        try:
            view = await self._read(self.task_id)
        except FanfuseError as exc:  # vanished (purged), expired
            body = exc.body().model_dump_json()
            self._publish(Snapshot(next(self._versions), None, body, exc))
            return
        data = view.model_dump_json()
        if self.latest is None or self.latest.data != data:
            self._publish(Snapshot(next(self._versions), view, data))


class Watchers:
    """The watches of one process's streams, one per watched search (see the module)."""

    def __init__(self, read: Read, marker: Marker | None = None, interval: float = INTERVAL):
        self._read = read
        self._marker: Marker = marker or (lambda task_id: None)
        self._interval = interval
        self._watches: dict[str, SearchWatch] = {}

    def __len__(self) -> int:
        """Searches watched now (each with one poller at most)."""
        return len(self._watches)

    def get(self, task_id: str) -> SearchWatch | None:
        return self._watches.get(task_id)

    def latest(self, task_id: str) -> Snapshot | None:
        """The latest snapshot of a search watched now (no read), else None."""
        watch = self._watches.get(task_id)
        return watch.latest if watch is not None else None

    def latest_view(self, task_id: str) -> TaskView | None:
        """A watched search's latest view, without a read (the error that ended it raised
        again: TaskNotFound, TaskExpired); None when it is not watched now. A stream opening on
        a watched search checks its caller against this, and costs no merge."""
        snapshot = self.latest(task_id)
        if snapshot is None:
            return None
        if snapshot.error is not None:
            raise snapshot.error.with_traceback(None)
        return snapshot.view

    @contextlib.asynccontextmanager
    async def watch(self, task_id: str) -> AsyncIterator[SearchWatch]:
        """Be one of the streams on `task_id` while inside: its watch starts with the first
        stream and stops with the last."""
        watch = self._watches.get(task_id)
        if watch is None:
            watch = self._watches[task_id] = SearchWatch(
                task_id, self._read, self._marker, self._interval
            )
        watch.streams += 1
        watch.start()
        try:
            yield watch
        finally:
            watch.streams -= 1
            if watch.streams == 0:
                del self._watches[task_id]
                await watch.stop()


def for_service(service: SearchService, interval: float = INTERVAL) -> Watchers:
    """Watchers over a service in this process: its store's change marker, its merged view."""

    async def read(task_id: str) -> TaskView:
        return service.status(task_id)

    return Watchers(read, service.store.change_marker, interval)


# ---------------------------------------------------------------------------------------------
# The cap on streams per caller


ANONYMOUS = "anonymous"
"""Where callers without a subject (a deployment with auth_required off) are counted, together."""


class StreamCap:
    """How many streams each caller holds open, at most `limit` each (`take`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: Counter[str] = Counter()

    def held(self, caller: Caller | None) -> int:
        return self._open[_subject(caller)]

    def total(self) -> int:
        """Every caller's streams open now."""
        return sum(self._open.values())

    @contextlib.contextmanager
    def take(self, caller: Caller | None) -> Iterator[None]:
        """One stream of `caller` while inside; TooManyStreams (429) at the cap."""
        release = self.acquire(caller)
        try:
            yield
        finally:
            release()

    def acquire(self, caller: Caller | None) -> Callable[[], None]:
        """Count one stream of `caller` (TooManyStreams at the cap); the function that
        releases it, once, however often it is called."""
        subject = _subject(caller)
        if self._open[subject] >= self.limit:
            raise TooManyStreams(
                f"at most {self.limit} streams open at once per caller; close one, or wait "
                "for one of the searches to end",
                STREAM_RETRY_AFTER_S,
            )
        self._open[subject] += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._open[subject] -= 1
                if self._open[subject] <= 0:
                    del self._open[subject]

        return release


def _subject(caller: Caller | None) -> str:
    return caller.subject if caller is not None else ANONYMOUS
