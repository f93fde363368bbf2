"""Waiting on one search, always bounded: the sync cap of `POST /search` and the event stream.

Both wait at most until the search's own deadline (its `timeout_s`, else the deployment's) plus
`GRACE`. The deadline aggregate finalizes a search a quarter second after its deadline, so a
search that is still not terminal then is stuck (a store failure), and the caller gets what
there is instead of a connection held forever: `/search` answers 202 with the running document,
the stream ends with a `timeout` event.

`settle` (POST /search) reads the task's status when one of its deliveries ends, not on a timer.
The event streams of one search all read one watcher (`fanfuse.http.streams`): it polls a cheap
change marker and merges the search once per change, for every stream on it, and each event is
encoded once for all of them (`Snapshot.derive`); a stream only decides which of those states
its client has not seen yet.

Event ids are resumable without storing events (`event_id`): an id names the state it carries,
as `{stamp}-{digest}`, the stamp being the newest `updated_at` of the task and its platform
documents (every write of either sets it) in microseconds, zero-padded so ids order as strings,
and the digest a hash of the event's data. A client reconnecting with `Last-Event-ID` gets the
current state at once when it is newer than the id (`newer`), then the live stream; it never
gets back the state it already has nor an older one, and a terminal search always answers its
`done` event, whatever the id. An id that does not parse is as no id: the current state is sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

from sse_starlette import ServerSentEvent

from fanfuse.http.streams import Snapshot, Watchers
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.wire.models import TaskView, utcnow

GRACE = 5.0
"""Seconds past a search's deadline that a waiter still waits for its final document."""
POLL = 0.25
"""Seconds at most between two reads of the task's status while `/search` waits; a delivery
of the search wakes the waiter sooner (see `settle`): this covers a cancel."""
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
STAMP_DIGITS = 17
"""Microseconds since 1970 fit in 17 digits until the year 5138: ids order as strings."""


def stamp(view: TaskView) -> int:
    """The newest write to the task or any of its platform documents, in microseconds."""
    newest = max([view.updated_at, *(run.updated_at for run in view.platform_runs)])
    return (newest - EPOCH) // timedelta(microseconds=1)


def event_id(view: TaskView, data: str) -> str:
    """`{stamp}-{digest}`: which state an event carries, meaningful across connections."""
    digest = hashlib.blake2b(data.encode(), digest_size=8).hexdigest()
    return f"{stamp(view):0{STAMP_DIGITS}d}-{digest}"


def newer(current: str, seen: str | None) -> bool:
    """Whether the state `current` names is one a client that last saw `seen` lacks: a later
    stamp, or the same stamp with other data (two writes within one microsecond, or a field
    computed when read); never an earlier stamp (a stale state) nor the very state it has."""
    if seen is None:
        return True
    now_stamp, _, now_digest = current.partition("-")
    seen_stamp, _, seen_digest = seen.partition("-")
    if now_stamp != seen_stamp:
        return now_stamp > seen_stamp
    return now_digest != seen_digest


def parse_last_event_id(header: str | None) -> str | None:
    """The id of `Last-Event-ID` when it is one this stream sends, else None (send everything)."""
    if header is None:
        return None
    head, dash, digest = header.strip().partition("-")
    valid = (
        dash
        and len(head) == STAMP_DIGITS
        and head.isdigit()
        and len(digest) == 16
        and all(c in "0123456789abcdef" for c in digest)
    )
    return header.strip() if valid else None


def cap(runtime: EmbeddedRuntime, view: TaskView) -> float:
    """Seconds to wait for `view`'s search: to its deadline, at most the deployment's, + GRACE."""
    remaining = (view.deadline_at - utcnow()).total_seconds()
    return max(0.0, min(remaining, runtime.settings.deadline_seconds)) + GRACE


async def settle(runtime: EmbeddedRuntime, task_id: str) -> TaskView:
    """The terminal document, or the current one when the cap passes first.

    It reads the task's own document (its status) after each of the search's deliveries ends
    (`EmbeddedRuntime.delivered`), and at least every `POLL`: a search is answered as soon as
    it is final, and a server with many waiting searches does not poll its store hundreds of
    times a second. The merged view (platform documents, and the preview fused from them) is
    made once, at the end.
    """
    service = runtime.service
    try:
        async with asyncio.timeout(cap(runtime, service.status(task_id))):
            while True:  # bounded by the timeout above
                status = service.store.task_status(task_id)
                if status is None or status.terminal:
                    break  # a vanished task: status() below says so (404 / 410)
                await runtime.delivered(task_id, POLL)
    except TimeoutError:
        pass
    return service.status(task_id)


def encoded(snapshot: Snapshot, kind: str) -> bytes:
    """The `kind` event of `snapshot`, encoded once for every stream that sends it."""

    def encode() -> bytes:
        if snapshot.view is None:  # the search vanished under the streams (purged, expired)
            return ServerSentEvent(snapshot.data, event="error").encode()
        return ServerSentEvent(snapshot.data, event=kind, id=ident(snapshot)).encode()

    return snapshot.derive(f"sse {kind}", encode)


def ident(snapshot: Snapshot) -> str:
    """The snapshot's event id (`event_id`), hashed once for every stream."""
    assert snapshot.view is not None
    view = snapshot.view
    return snapshot.derive("sse id", lambda: event_id(view, snapshot.data))


async def events(
    runtime: EmbeddedRuntime,
    watchers: Watchers,
    task_id: str,
    last_id: str | None = None,
) -> AsyncIterator[bytes]:
    """`progress` on each change of the document, then `done` (terminal) or `timeout` (the cap
    passed), each with the TaskView as JSON (or `error`, the search vanished); then the stream
    ends. `last_id`: the client's `Last-Event-ID` (parsed): the states up to it are not sent
    again. Read from the search's shared watch (`watchers`)."""
    seen = last_id
    version = 0
    give_up: float | None = None
    async with watchers.watch(task_id) as watch:
        while True:
            timeout = None if give_up is None else max(0.0, give_up - time.monotonic())
            try:
                async with asyncio.timeout(timeout):
                    snapshot = await watch.next(version)
            except TimeoutError:
                assert watch.latest is not None  # a deadline is known once one was read
                yield encoded(watch.latest, "timeout")
                return
            version = snapshot.version
            if snapshot.view is None:
                yield encoded(snapshot, "error")
                return
            if give_up is None:
                give_up = time.monotonic() + cap(runtime, snapshot.view)
            if snapshot.view.status.terminal:
                yield encoded(snapshot, "done")
                return
            if newer(ident(snapshot), seen):
                yield encoded(snapshot, "progress")
                seen = ident(snapshot)
