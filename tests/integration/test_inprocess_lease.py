"""The embedded queue's redelivery: a LeaseHeld answer is tried again after its Retry-After, as
Cloud Tasks would on the 503; any other failure is not (the deadline finalizes instead)."""

from __future__ import annotations

import asyncio

from fanfuse.queue.inprocess import InProcessQueue, Message
from fanfuse.queue.port import PlatformMessage
from fanfuse.wire.errors import LeaseHeld


async def test_a_held_lease_is_delivered_again_after_retry_after() -> None:
    seen: list[Message] = []
    done = asyncio.Event()

    async def handler(message: Message) -> None:
        seen.append(message)
        if len(seen) == 1:
            raise LeaseHeld("leased to another delivery", 0.05)
        done.set()

    queue = InProcessQueue(asyncio.get_running_loop(), handler)
    message = PlatformMessage(task_id="t1", platform="docs")
    queue.enqueue_platform(message)
    await asyncio.wait_for(done.wait(), 5)
    assert seen == [message, message]
    queue.close()


async def test_another_failure_is_not_delivered_again() -> None:
    seen: list[Message] = []

    async def handler(message: Message) -> None:
        seen.append(message)
        raise RuntimeError("a platform's bug")

    queue = InProcessQueue(asyncio.get_running_loop(), handler)
    queue.enqueue_platform(PlatformMessage(task_id="t1", platform="docs"))
    await asyncio.sleep(0.2)
    assert len(seen) == 1
    queue.close()
