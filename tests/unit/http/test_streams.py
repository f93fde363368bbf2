"""One watcher per search, shared by its streams, and the cap on streams per caller
(fanfuse.http.streams), over a real embedded runtime; and MCP's listen streams on it
(fronts/mcp/tasks.py). Issue 29, item 2.

Streams here are what the fronts run inside `Watchers.watch` (serve's event stream:
fronts/serve/watch.py; MCP's listen: `TaskListen`); the real server with 150 streams, its
latency and CPU, is tests/integration/test_serve_streams.py. Waits are on events (a snapshot
published, a count of marker reads reached), each bounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import SubscriptionsListenRequestParams

from fanfuse.fronts.mcp import tasks as mcp_tasks
from fanfuse.fronts.mcp.access import CALLER_KEY, LOCAL_CALLER
from fanfuse.fronts.serve import watch as sse
from fanfuse.http.api import error_answer
from fanfuse.http.backend import EmbeddedBackend
from fanfuse.http.streams import StreamCap, Watchers
from fanfuse.platforms import Registry
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.errors import TaskNotFound, TooManyStreams
from fanfuse.wire.models import Caller, TaskView
from tests.support.fakes import FakePlatform

INTERVAL = 0.01
ALICE = Caller(subject="key:alice", via="api_key")
BOB = Caller(subject="key:bob", via="api_key")


@dataclass
class Search:
    """A running search in a real embedded runtime: `quick` answers at once, `held` when the
    test opens `gate`; `merges` counts the service's merged reads, `markers` the marker reads."""

    runtime: EmbeddedRuntime
    task_id: str
    gate: asyncio.Event
    merges: int = 0
    markers: int = 0
    marked: dict[int, asyncio.Event] = field(default_factory=dict)

    def watchers(self) -> Watchers:
        service = self.runtime.service

        async def read(task_id: str) -> TaskView:
            self.merges += 1
            return service.status(task_id)

        def marker(task_id: str) -> str | None:
            self.markers += 1
            for count, reached in self.marked.items():
                if self.markers >= count:
                    reached.set()
            return service.store.change_marker(task_id)

        return Watchers(read, marker, INTERVAL)

    async def markers_read(self, count: int) -> None:
        """Until the marker has been read `count` times in all (5 s at most)."""
        reached = self.marked.setdefault(count, asyncio.Event())
        if self.markers >= count:
            return
        await asyncio.wait_for(reached.wait(), 5)


@pytest.fixture
async def search(settings: Settings) -> AsyncIterator[Search]:
    gate = asyncio.Event()
    registry = Registry.of([FakePlatform("quick"), FakePlatform("held", gate=gate)])
    async with EmbeddedRuntime(settings, registry=registry) as runtime:
        accepted = runtime.service.start({"query": "q", "platform": "quick, held"})
        running = Search(runtime, accepted.task_id, gate)
        try:
            yield running
        finally:
            gate.set()


async def follow(watchers: Watchers, task_id: str, opened: asyncio.Event | None = None) -> int:
    """A stream: reads the watch until the search is over; how many states it received."""
    received = 0
    version = 0
    async with watchers.watch(task_id) as watch:
        while True:
            snapshot = await watch.next(version)
            version = snapshot.version
            received += 1
            if opened is not None:
                opened.set()
            if snapshot.over:
                return received


async def test_fifty_streams_share_one_watcher_that_merges_only_when_the_marker_moves(
    search: Search,
) -> None:
    watchers = search.watchers()
    opened = [asyncio.Event() for _ in range(50)]
    streams = [asyncio.create_task(follow(watchers, search.task_id, o)) for o in opened]
    await asyncio.wait_for(asyncio.gather(*(o.wait() for o in opened)), 5)
    assert len(watchers) == 1  # one watcher, whatever the number of streams
    merges_now = search.merges
    await search.markers_read(search.markers + 30)  # thirty polls with nothing new to read
    idle_merges = search.merges - merges_now
    assert idle_merges <= 2, idle_merges  # a progress write may land meanwhile; not 50 x 30
    search.gate.set()
    received = await asyncio.wait_for(asyncio.gather(*streams), 10)
    assert all(n >= 1 for n in received)
    # Every state a stream received was read once for all fifty.
    assert search.merges <= max(received) + 2, (search.merges, received)
    assert len(watchers) == 0  # the last stream closed: no watcher left


async def test_the_watch_stops_with_its_last_stream_and_starts_again_with_a_new_one(
    search: Search,
) -> None:
    watchers = search.watchers()
    async with watchers.watch(search.task_id) as first:
        await first.next(0)
        async with watchers.watch(search.task_id) as second:
            assert second is first and first.running
        assert first.running  # one stream is left
        await search.markers_read(search.markers + 3)
    assert not first.running and len(watchers) == 0  # its poller was cancelled
    async with watchers.watch(search.task_id) as again:
        assert again is not first and again.running
        assert (await again.next(0)).view is not None


async def test_a_terminal_search_stops_its_poller_while_streams_remain(search: Search) -> None:
    watchers = search.watchers()
    search.gate.set()
    async with watchers.watch(search.task_id) as watch:
        version = 0
        while True:
            snapshot = await asyncio.wait_for(watch.next(version), 10)
            version = snapshot.version
            if snapshot.over:
                break
        assert watch.latest is not None and watch.latest.view is not None
        assert watch.latest.view.status.terminal
        for _ in range(100):  # the poller returns right after publishing the terminal state
            if not watch.running:
                break
            await asyncio.sleep(INTERVAL)
        assert not watch.running


async def test_a_search_that_vanishes_ends_its_streams_with_its_error(search: Search) -> None:
    """Purged under its streams: the watch publishes the 404 once; a stream opening then is
    answered from it (no read), and serve's stream sends its `error` event."""
    watchers = search.watchers()
    async with watchers.watch(search.task_id) as watch:
        first = await watch.next(0)
        search.runtime.service.store.withdraw(search.task_id)
        gone = await asyncio.wait_for(watch.next(first.version), 5)
        assert isinstance(gone.error, TaskNotFound) and gone.view is None and gone.over
        with pytest.raises(TaskNotFound):
            watchers.latest_view(search.task_id)
        sent = [e async for e in sse.events(search.runtime, watchers, search.task_id)]
    assert len(sent) == 1 and sent[0].startswith(b"event: error\r\n")


async def test_each_event_is_encoded_once_for_every_stream(search: Search) -> None:
    watchers = search.watchers()
    search.gate.set()
    sent = await asyncio.wait_for(
        asyncio.gather(
            *(collect(sse.events(search.runtime, watchers, search.task_id)) for _ in range(5))
        ),
        10,
    )
    finals = [events[-1] for events in sent]
    assert all(f.startswith(b"id: ") and b"event: done" in f for f in finals)
    assert all(f is finals[0] for f in finals)  # the very same bytes object: encoded once


async def collect(events: AsyncIterator[bytes]) -> list[bytes]:
    return [event async for event in events]


# -- the cap --------------------------------------------------------------------------------------


def test_a_caller_holds_at_most_its_cap_of_streams_and_gets_them_back() -> None:
    cap = StreamCap(2)
    first, second = cap.acquire(ALICE), cap.acquire(ALICE)
    with pytest.raises(TooManyStreams) as refused:
        cap.acquire(ALICE)
    answer = error_answer(refused.value)
    assert answer.status == 429 and answer.headers == {"Retry-After": "5"}
    assert answer.body["error"] == "too_many_streams"
    with cap.take(BOB):  # another caller has a cap of its own
        assert cap.held(BOB) == 1 and cap.total() == 3
    first()
    first()  # released once, however often it is called
    assert cap.held(ALICE) == 1
    third = cap.acquire(ALICE)
    second(), third()
    assert cap.total() == 0
    with cap.take(None), cap.take(None), pytest.raises(TooManyStreams):
        cap.acquire(None)  # anonymous callers are counted together


# -- MCP's listen streams -----------------------------------------------------------------------


@dataclass
class FakeSession:
    """What TaskListen uses of an MCP session: the client's capabilities, and where its
    notifications go."""

    sent: list[Any] = field(default_factory=list)
    client_capabilities: Any = field(
        default_factory=lambda: SimpleNamespace(extensions={mcp_tasks.EXTENSION_ID: {}})
    )
    acknowledged: asyncio.Event = field(default_factory=asyncio.Event)

    async def send_notification(self, note: Any, related_request_id: Any = None) -> None:
        self.sent.append(note)
        if note.method == "notifications/subscriptions/acknowledged":
            self.acknowledged.set()


def listen_context(caller: Caller, request_id: int) -> Any:
    """A `subscriptions/listen` request's context, on a 2026-07-28 connection."""
    return SimpleNamespace(
        protocol_version="2026-07-28",
        session=FakeSession(),
        request=SimpleNamespace(scope={CALLER_KEY: caller}),
        request_id=request_id,
    )


def listen_params(task_id: str) -> SubscriptionsListenRequestParams:
    return SubscriptionsListenRequestParams.model_validate(
        {"notifications": {"taskIds": [task_id]}}
    )


def owned_search(runtime: EmbeddedRuntime, caller: Caller) -> str:
    return runtime.service.start({"query": "q", "platform": "quick, held"}, caller=caller).task_id


async def test_listen_streams_on_one_task_share_its_watcher_and_each_hears_it_end(
    search: Search, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty listen streams on one task: once each is acknowledged, a second of following
    costs a merge per change of the task (none here: it waits on its gate), not the twenty
    reads every 250 ms the streams made alone before (about 80)."""
    service = search.runtime.service
    merged = service.status

    def counted(task_id: str) -> TaskView:
        search.merges += 1
        return merged(task_id)

    monkeypatch.setattr(service, "status", counted)
    extension = mcp_tasks.SearchTasks(EmbeddedBackend(search.runtime))
    listen = mcp_tasks.TaskListen(extension)
    task_id = owned_search(search.runtime, LOCAL_CALLER)
    contexts = [listen_context(LOCAL_CALLER, i) for i in range(20)]
    streams = [asyncio.create_task(listen(c, listen_params(task_id))) for c in contexts]
    for context in contexts:  # each acknowledged: it has agreed to the task, and follows it
        await asyncio.wait_for(context.session.acknowledged.wait(), 5)
    merges = search.merges
    await asyncio.sleep(1.0)  # a window of four of the old polls
    assert search.merges - merges <= 3, search.merges - merges
    assert len(extension.watchers) == 1
    search.gate.set()
    await asyncio.wait_for(asyncio.gather(*streams), 10)
    for context in contexts:
        told = [n.params for n in context.session.sent if n.method == "notifications/tasks"]
        assert [t["status"] for t in told] == ["completed"], told
        assert told[0]["taskId"] == task_id
    assert len(extension.watchers) == 0


async def test_a_caller_past_its_listen_streams_cap_is_refused_and_others_are_not(
    search: Search,
) -> None:
    backend = EmbeddedBackend(search.runtime)
    extension = mcp_tasks.SearchTasks(backend, gated=True, streams=StreamCap(2))
    listen = mcp_tasks.TaskListen(extension)
    task_id = owned_search(search.runtime, ALICE)
    held = [
        asyncio.create_task(listen(listen_context(ALICE, i), listen_params(task_id)))
        for i in (1, 2)
    ]
    for _ in range(500):  # both are counted once they started
        if extension.streams.held(ALICE) == 2:
            break
        await asyncio.sleep(INTERVAL)
    with pytest.raises(MCPError) as refused:
        await listen(listen_context(ALICE, 3), listen_params(task_id))
    assert refused.value.error.code == mcp_tasks.RATE_LIMITED
    assert refused.value.error.data == {"retryAfterSeconds": 5.0}
    bobs = await asyncio.wait_for(listen(listen_context(BOB, 4), listen_params(task_id)), 5)
    assert bobs is not None  # not bob's task: nothing agreed to, answered at once
    search.gate.set()
    await asyncio.wait_for(asyncio.gather(*held), 10)
    assert extension.streams.total() == 0
