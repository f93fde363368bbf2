"""The embedded queue's bookkeeping: a name dedupes while its delivery is still to come (pending,
on its timer, running, waiting out a held lease) and is forgotten, with its timer, once it has
run, so a long-lived `fanfuse serve` holds only what is still to come."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from fanfuse.platforms import Registry
from fanfuse.queue.inprocess import InProcessQueue, Message
from fanfuse.queue.port import AggregateMessage, PlatformMessage
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.errors import LeaseHeld
from fanfuse.wire.models import utcnow
from tests.support.fakes import FakePlatform

TASKS = 5_000


def bookkeeping(queue: InProcessQueue) -> dict[str, int]:
    """The sizes of everything the queue remembers between deliveries."""
    return {
        "names": len(queue._names),
        "timers": len(queue._timers),
        "running": len(queue._running),
    }


async def settle(queue: InProcessQueue) -> None:
    """Wait until no delivery is running (their done callbacks have run); at most 5 s."""
    for _ in range(500):
        if not queue._running:
            return
        await asyncio.sleep(0.01)


async def test_thousands_of_tasks_that_have_run_leave_nothing_behind() -> None:
    """5,000 platform deliveries now and 5,000 delayed deadline deliveries: while they are to
    come, all 10,000 names are held (and dedupe); once all have run, none is, and no timer."""
    ran = 0
    all_ran = asyncio.Event()

    async def handler(message: Message) -> None:
        nonlocal ran
        ran += 1
        if ran == 2 * TASKS:
            all_ran.set()

    queue = InProcessQueue(asyncio.get_running_loop(), handler)
    soon = utcnow() + timedelta(seconds=0.5)
    for i in range(TASKS):
        queue.enqueue_platform(PlatformMessage(task_id=f"t{i}", platform="docs"))
        queue.enqueue_aggregate(AggregateMessage(task_id=f"t{i}", deadline=True), at=soon)
    assert bookkeeping(queue)["names"] == 2 * TASKS
    for i in range(TASKS):  # every one a duplicate while it is still to come
        queue.enqueue_aggregate(AggregateMessage(task_id=f"t{i}", deadline=True), at=soon)
    await asyncio.wait_for(all_ran.wait(), 60)
    await settle(queue)
    assert ran == 2 * TASKS
    assert bookkeeping(queue) == {"names": 0, "timers": 0, "running": 0}
    queue.close()


async def test_a_name_dedupes_while_pending_running_and_on_its_timer() -> None:
    seen: list[Message] = []
    started, release = asyncio.Event(), asyncio.Event()

    async def handler(message: Message) -> None:
        seen.append(message)
        started.set()
        await release.wait()

    queue = InProcessQueue(asyncio.get_running_loop(), handler)
    run = PlatformMessage(task_id="t1", platform="docs")
    deadline = AggregateMessage(task_id="t1", deadline=True)
    later = utcnow() + timedelta(minutes=5)  # never fires here: close() cancels it
    queue.enqueue_platform(run)
    queue.enqueue_platform(run)  # pending: a duplicate
    queue.enqueue_aggregate(deadline, at=later)
    await asyncio.wait_for(started.wait(), 5)
    queue.enqueue_platform(run)  # running: a duplicate
    queue.enqueue_aggregate(deadline, at=later)  # on its timer: a duplicate
    assert seen == [run] and bookkeeping(queue) == {"names": 2, "timers": 1, "running": 1}
    release.set()
    await settle(queue)
    assert queue._names == {"t1--deadline"}  # the run is forgotten, the deadline still to come
    assert bookkeeping(queue) == {"names": 1, "timers": 1, "running": 0}
    queue.enqueue_platform(run)  # it has run: a second delivery, which the store makes harmless
    await asyncio.sleep(0)
    await settle(queue)
    assert seen == [run, run]
    queue.close()


async def test_a_name_stays_held_while_its_delivery_waits_out_a_held_lease() -> None:
    seen: list[Message] = []
    refused, retried, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def handler(message: Message) -> None:
        seen.append(message)
        if len(seen) == 1:
            refused.set()
            raise LeaseHeld("leased to another delivery", 0.1)
        retried.set()
        await release.wait()

    queue = InProcessQueue(asyncio.get_running_loop(), handler)
    message = PlatformMessage(task_id="t1", platform="docs")
    queue.enqueue_platform(message)
    await asyncio.wait_for(refused.wait(), 5)
    queue.enqueue_platform(message)  # the retry is still to come: a duplicate
    await asyncio.wait_for(retried.wait(), 5)
    queue.enqueue_platform(message)  # the retry is running: a duplicate
    assert bookkeeping(queue) == {"names": 1, "timers": 0, "running": 1}
    release.set()
    await settle(queue)
    assert seen == [message, message]
    assert bookkeeping(queue) == {"names": 0, "timers": 0, "running": 0}
    queue.close()


async def test_a_failed_delivery_is_forgotten_too() -> None:
    async def handler(message: Message) -> None:
        raise RuntimeError("a platform's bug")

    queue = InProcessQueue(asyncio.get_running_loop(), handler)
    queue.enqueue_platform(PlatformMessage(task_id="t1", platform="docs"))
    await asyncio.sleep(0)  # the delivery starts
    await settle(queue)
    assert bookkeeping(queue) == {"names": 0, "timers": 0, "running": 0}
    queue.close()


async def test_finished_searches_leave_only_their_deadlines(settings: Settings) -> None:
    """Through the service: after 20 searches have completed, the queue holds each one's
    deadline delivery (still to come) and nothing of its platform runs or aggregation."""
    platforms = [FakePlatform("alpha"), FakePlatform("beta")]
    async with EmbeddedRuntime(settings, registry=Registry.of(platforms)) as rt:
        ids = [(await rt.search({"query": f"q{i}"})).task_id for i in range(20)]
        assert rt._queue is not None
        await settle(rt._queue)
        assert rt._queue._names == {f"{task_id}--deadline" for task_id in ids}
        assert bookkeeping(rt._queue) == {"names": 20, "timers": 20, "running": 0}
