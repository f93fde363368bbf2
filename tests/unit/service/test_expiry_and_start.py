"""Issue 11, items 4 and 5 on a real SearchService over SQLite: a search past its `expires_at`
is 410 to its owner (404 to anyone else) with nothing of it served, and cancel cannot touch it;
a start whose store was too slow to leave time for the search is a 503 with Retry-After that
leaves no document behind."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from fanfuse.auth.callers import visible_status
from fanfuse.http import api
from fanfuse.platforms import Registry
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.errors import StartTooSlow, TaskExpired, TaskNotFound
from fanfuse.wire.models import Caller, PlatformRun, Task, TaskStatus
from tests.support.fakes import Clock, FakePlatform, HeldQueue

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Caller(subject="alice", via="api_key", key_id="k1")
BOB = Caller(subject="bob", via="api_key", key_id="k2")


class StallingStore(SqliteStore):
    """A real SQLite store whose create stalls for `stall` seconds (a slow backend)."""

    def __init__(self, path: object, stall: float) -> None:
        super().__init__(str(path))
        self.stall = stall

    def create(self, task: Task, runs: Sequence[PlatformRun]) -> None:
        time.sleep(self.stall)
        super().create(task, runs)


def documents(store: SqliteStore) -> int:
    with store._lock:
        row = store._db.execute(
            "SELECT (SELECT COUNT(*) FROM tasks) + (SELECT COUNT(*) FROM platforms)"
        ).fetchone()
    return int(row[0])


@pytest.fixture
def service(settings: Settings) -> Iterator[SearchService]:
    store = SqliteStore(settings.db_path)
    registry = Registry.of([FakePlatform(n) for n in ("docs", "web")])
    yield SearchService(store, HeldQueue(), registry, settings, clock=Clock(T0))
    store.close()


def test_an_expired_search_is_410_to_its_owner_404_to_others_and_serves_nothing(
    service: SearchService,
) -> None:
    accepted = service.start({"query": "q", "platform": "docs"}, caller=ALICE)
    task_id = accepted.task_id
    assert visible_status(service.status, task_id, ALICE).task_id == task_id
    with pytest.raises(TaskNotFound):
        visible_status(service.status, task_id, BOB)
    assert isinstance(service.clock, Clock)
    service.clock.now = T0 + timedelta(minutes=service.settings.ttl_minutes)  # at expires_at
    with pytest.raises(TaskExpired) as info:
        visible_status(service.status, task_id, ALICE)
    answer = api.error_answer(info.value)
    assert answer.status == 410 and answer.body["error"] == "expired"
    assert set(answer.body) <= {"error", "message", "problems"}  # no field of the document
    assert "q" not in answer.body["message"].replace(task_id, "")  # nor the query
    for who in (BOB, None):
        with pytest.raises(TaskNotFound):  # the id stays undisclosed to anyone else
            visible_status(service.status, task_id, who)


def test_an_ownerless_expired_search_is_410_to_anyone(service: SearchService) -> None:
    task_id = service.start({"query": "q"}).task_id
    assert isinstance(service.clock, Clock)
    service.clock.now = T0 + timedelta(minutes=service.settings.ttl_minutes, seconds=1)
    for who in (ALICE, None):
        with pytest.raises(TaskExpired):
            visible_status(service.status, task_id, who)


def test_cancel_of_an_expired_search_is_410_and_writes_nothing(service: SearchService) -> None:
    task_id = service.start({"query": "q", "platform": "docs"}).task_id
    assert isinstance(service.clock, Clock)
    service.clock.now = T0 + timedelta(minutes=service.settings.ttl_minutes)
    with pytest.raises(TaskExpired):
        service.cancel(task_id)
    task = service.store.get_task(task_id)
    assert task is not None and task.status is TaskStatus.PENDING
    service.clock.now -= timedelta(seconds=1)  # just before: cancel still works
    assert service.cancel(task_id).status is TaskStatus.CANCELLED


def test_a_start_the_store_stalled_past_the_minimum_is_503_and_leaves_nothing(
    settings: Settings,
) -> None:
    quick = settings.model_copy(update={"deadline_seconds": 1.0})
    store = StallingStore(settings.db_path, stall=0.7)  # > half of the 1 s budget
    queue = HeldQueue()
    registry = Registry.of([FakePlatform("docs")])
    service = SearchService(store, queue, registry, quick)
    try:
        started = time.monotonic()
        with pytest.raises(StartTooSlow) as info:
            service.start({"query": "q", "platform": "docs"}, caller=ALICE)
        assert time.monotonic() - started < 5  # bounded
        answer = api.error_answer(info.value)
        assert answer.status == 503 and answer.headers == {"Retry-After": "1"}
        assert "nothing was kept" in answer.body["message"]
        assert documents(store) == 0 and queue.messages == 0
        store.stall = 0.05  # a healthy store: accepted, written, enqueued
        task_id = service.start({"query": "q", "platform": "docs"}, caller=ALICE).task_id
        assert store.get_task(task_id) is not None and queue.messages == 2
    finally:
        store.close()


def test_a_create_that_fails_leaves_nothing(settings: Settings) -> None:
    class Failing(SqliteStore):
        def create(self, task: Task, runs: Sequence[PlatformRun]) -> None:
            super().create(task, runs)  # the commit landed, but the call timed out
            raise TimeoutError("deadline exceeded")

    store = Failing(settings.db_path)
    queue = HeldQueue()
    service = SearchService(store, queue, Registry.of([FakePlatform("docs")]), settings)
    try:
        with pytest.raises(TimeoutError):
            service.start({"query": "q", "platform": "docs"})
        assert documents(store) == 0 and queue.messages == 0
    finally:
        store.close()
