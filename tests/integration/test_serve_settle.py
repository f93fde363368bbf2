"""`POST /search` answers when the search's last delivery ends, not at its next poll.

`fronts.serve.watch.settle` reads the task's status when one of its deliveries ends
(`EmbeddedRuntime.delivered`, woken by the runtime's `_nudge`), and at least every `POLL` for what
no delivery does (a cancel). Here `POLL` is a minute: an answer within a quarter of it after the
platform is let go can only come from the wake-up. In-process (the app over httpx's ASGI
transport), so nothing but the search itself runs between the release and the answer.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from fanfuse.auth import keys
from fanfuse.fronts.serve import watch
from fanfuse.fronts.serve.app import create_app
from fanfuse.platforms import Registry
from fanfuse.settings import Settings
from tests.support.fakes import FakePlatform

POLL = 60.0


async def test_post_search_answers_when_its_last_delivery_ends_not_at_the_next_poll(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: `EmbeddedRuntime._nudge` made a no-op (the answer waits for the poll)."""
    monkeypatch.setattr(watch, "POLL", POLL)
    gate, arrived = asyncio.Event(), asyncio.Barrier(2)
    platform = FakePlatform("held", barrier=arrived, gate=gate)
    local_keys: list[str] = []
    app = create_app(settings, registry=Registry.of([platform]), warm=[], on_key=local_keys.append)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {keys.API_KEY_HEADER: local_keys[0]}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=headers
        ) as client:
            answer = asyncio.create_task(
                client.post("/search", json={"query": "q", "platform": "held"})
            )
            # The run starts only once the request waits (it yields first when it waits).
            async with asyncio.timeout(30):  # a bound on a failure, not a measure
                await arrived.wait()
            assert not answer.done()
            gate.set()
            done, _ = await asyncio.wait({answer}, timeout=POLL / 4)
            if not done:
                answer.cancel()
            assert done, f"no answer within {POLL / 4:g} s of the release: it waited for a poll"
            response = answer.result()
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "completed"
