"""The cloud runtimes' last fan-in finalizes the search itself (SearchService(finalize_at_fan_in)),
with the aggregator's transaction: exactly once, never for a mode that reranks, and the aggregate
task still enqueued, as the path for everything the fan-in does not finish.

On SQLite with a queue that holds every message, so each delivery is the test's to make; the same
service code runs on Firestore and DynamoDB (the end-to-end tests run both stacks)."""

from __future__ import annotations

from typing import Any

import pytest

from fanfuse.platforms import Registry
from fanfuse.queue.base import AggregateMessage
from fanfuse.rules import lifecycle
from fanfuse.rules.mutations import Mutator, Writes
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.models import SearchRequest, TaskStatus, utcnow
from tests.support.fakes import FakePlatform, HeldQueue, pending_task


def service(settings: Settings, *, finalize_at_fan_in: bool, store: Any = None) -> SearchService:
    registry = Registry.of([FakePlatform("a"), FakePlatform("b")])
    return SearchService(
        store or SqliteStore(settings.db_path),
        HeldQueue(),
        registry,
        settings,
        finalize_at_fan_in=finalize_at_fan_in,
    )


def fan_ins(queue: Any) -> list[AggregateMessage]:
    return [m for m in queue.aggregates if not m.deadline]


async def run_all(svc: SearchService, payload: dict[str, Any]) -> tuple[str, list[str]]:
    accepted = svc.start(payload)
    queue: Any = svc.queue
    outcomes = [await svc.run_platform(m) for m in list(queue.platforms)]
    return accepted.task_id, outcomes


async def test_the_last_fan_in_finalizes_once_and_the_aggregate_finds_it_final(
    settings: Settings,
) -> None:
    svc = service(settings, finalize_at_fan_in=True)
    task_id, outcomes = await run_all(svc, {"query": "q", "platform": "a,b"})
    assert outcomes == ["succeeded", "succeeded"]
    view = svc.status(task_id)
    assert view.status is TaskStatus.COMPLETED  # before any aggregate delivery
    assert view.counters.done == 2 and len(view.results) == 10
    assert {r.platform for r in view.results} == {"a", "b"}  # both platforms' results, fused
    # The fan-in's aggregate task is still enqueued (once), and answers from a read.
    (fan_in,) = fan_ins(svc.queue)
    assert fan_in == AggregateMessage(task_id=task_id)
    final = svc.store.get_task(task_id)
    assert await svc.aggregate(fan_in) == "already_final"
    assert await svc.aggregate(AggregateMessage(task_id=task_id, deadline=True)) == (
        "already_final"
    )
    assert svc.store.get_task(task_id) == final  # nothing rewritten
    # A redelivered platform task changes nothing either, and enqueues nothing more.
    queue: Any = svc.queue
    assert await svc.run_platform(queue.platforms[0]) == "skipped"
    assert len(fan_ins(svc.queue)) == 1


async def test_only_the_last_fan_in_finalizes(settings: Settings) -> None:
    svc = service(settings, finalize_at_fan_in=True)
    accepted = svc.start({"query": "q", "platform": "a,b"})
    queue: Any = svc.queue
    assert await svc.run_platform(queue.platforms[0]) == "succeeded"
    assert svc.status(accepted.task_id).status is TaskStatus.RUNNING
    assert fan_ins(queue) == []
    assert await svc.run_platform(queue.platforms[1]) == "succeeded"
    assert svc.status(accepted.task_id).status is TaskStatus.COMPLETED


async def test_a_mode_that_reranks_leaves_the_finalization_to_the_aggregate_task(
    settings: Settings,
) -> None:
    svc = service(settings, finalize_at_fan_in=True)
    payload = {"query": "q", "platform": "a,b", "mode": "comprehensive", "include_content": False}
    task_id, outcomes = await run_all(svc, payload)
    assert outcomes == ["succeeded", "succeeded"]
    assert svc.status(task_id).status is TaskStatus.RUNNING  # all ended, not final: reranks
    assert fan_ins(svc.queue) == [AggregateMessage(task_id=task_id)]


async def test_without_the_option_the_aggregate_task_finalizes_as_before(
    settings: Settings,
) -> None:
    svc = service(settings, finalize_at_fan_in=False)  # the embedded runtime's service
    task_id, _ = await run_all(svc, {"query": "q", "platform": "a,b"})
    assert svc.status(task_id).status is TaskStatus.RUNNING
    (fan_in,) = fan_ins(svc.queue)
    assert await svc.aggregate(fan_in) == "completed"


class FinalizeFails(SqliteStore):
    """SQLite whose finalizing transactions fail (a store unreachable just then), `left` times."""

    def __init__(self, *args: Any, left: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.left = left

    def transact(self, task_id: str, names: Any, mutate: Mutator) -> Writes | None:
        if names is None and self.left > 0:  # the fan-in and claims name their run
            self.left -= 1
            raise ConnectionError("UNAVAILABLE: store briefly unreachable")
        return super().transact(task_id, names, mutate)


async def test_a_finalization_that_cannot_commit_is_left_to_the_aggregate_task(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    store = FinalizeFails(settings.db_path, left=1)
    svc = service(settings, finalize_at_fan_in=True, store=store)
    task_id, outcomes = await run_all(svc, {"query": "q", "platform": "a,b"})
    assert outcomes == ["succeeded", "succeeded"]  # the delivery itself succeeds
    assert "finalizing at fan-in failed" in caplog.text
    assert svc.status(task_id).status is TaskStatus.RUNNING
    (fan_in,) = fan_ins(svc.queue)
    assert await svc.aggregate(fan_in) == "completed"
    assert await svc.aggregate(fan_in) == "already_final"


def test_finalized_at_fan_in_is_for_modes_that_do_not_rerank() -> None:
    task = pending_task("t1", None, utcnow())
    assert lifecycle.finalized_at_fan_in(task)
    request = {"query": "q", "platform": "docs", "mode": "comprehensive"}
    reranking = task.model_copy(update={"request": SearchRequest.model_validate(request)})
    assert not lifecycle.finalized_at_fan_in(reranking)
