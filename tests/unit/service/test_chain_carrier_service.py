"""A chain whose first member this deployment does not run: its first turn rides the queue of the
first member that runs here (a platform not deployed has no queue: enqueuing on it was a 503 for
a valid request, found by schemathesis against the functions), and the turn passes the first
member over and asks the next."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from fanfuse.platforms import Registry
from fanfuse.queue.port import PlatformMessage
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.chain import MemberState
from fanfuse.wire.models import Caller, PlatformState
from tests.support.fakes import Clock, FakePlatform, HeldQueue

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Caller(subject="alice", via="api_key", key_id="k1")


@pytest.fixture
def held(settings: Settings) -> Iterator[tuple[SearchService, HeldQueue, SqliteStore]]:
    store = SqliteStore(settings.db_path)
    queue = HeldQueue()
    registry = Registry(
        {}, instances=[FakePlatform(n) for n in ("arxiv", "docs", "web")], deployed=["docs", "web"]
    )
    yield SearchService(store, queue, registry, settings, clock=Clock(T0)), queue, store
    store.close()


def test_a_first_member_not_deployed_sends_the_turn_on_the_next_deployed_members_queue(
    held: tuple[SearchService, HeldQueue, SqliteStore],
) -> None:
    service, queue, _ = held
    service.start({"query": "q", "platform": "arxiv|docs, web"}, caller=ALICE)
    by_run = {m.platform: m for m in queue.platforms}
    assert by_run["arxiv"].queue == "docs" and by_run["arxiv"].member is None
    assert by_run["web"].queue == "web" and by_run["web"].carrier is None
    # the body of a plain first turn is what it always was: no carrier key
    assert "carrier" not in by_run["web"].model_dump()
    assert by_run["arxiv"].model_dump()["carrier"] == "docs"


def test_a_deployed_first_member_keeps_its_own_queue(
    held: tuple[SearchService, HeldQueue, SqliteStore],
) -> None:
    service, queue, _ = held
    service.start({"query": "q", "platform": "docs|arxiv"}, caller=ALICE)
    (message,) = queue.platforms
    assert message.queue == "docs" and message.carrier is None


async def test_the_carried_turn_passes_the_first_member_over_and_the_next_answers(
    held: tuple[SearchService, HeldQueue, SqliteStore],
) -> None:
    service, queue, store = held
    accepted = service.start({"query": "q", "platform": "arxiv|docs"}, caller=ALICE)
    (message,) = queue.platforms
    delivered = PlatformMessage.model_validate(message.model_dump())  # as the queue carries it
    await service.run_platform(delivered)
    (run,) = store.get_runs(accepted.task_id)
    states = {m.name: m.state for m in run.members}
    assert states == {"arxiv": MemberState.SKIPPED, "docs": MemberState.ANSWERED}
    assert run.state is PlatformState.SUCCEEDED and run.results
