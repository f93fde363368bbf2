"""The cloud runtimes' last fan-in finalizes the search itself (SearchService(finalize_at_fan_in)),
in the fan-in's own transaction (rules/fan_in.py): exactly once, never for a mode that reranks
(the aggregate task is enqueued for those), and a failure loses nothing.

On SQLite with a queue that holds every message, so each delivery is the test's to make; the same
service code runs on Firestore and DynamoDB (the end-to-end tests run both stacks)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from fanfuse.platforms import Registry
from fanfuse.queue.port import AggregateMessage
from fanfuse.rules import lifecycle
from fanfuse.rules.mutations import Mutator, Writes
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tracing.spans import rule_name
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


async def test_the_last_fan_in_finalizes_once_in_its_own_transaction(
    settings: Settings,
) -> None:
    store = Counting(settings.db_path)
    svc = service(settings, finalize_at_fan_in=True, store=store)
    accepted = svc.start({"query": "q", "platform": "a,b"})
    queue: Any = svc.queue
    assert await svc.run_platform(queue.platforms[0]) == "succeeded"
    store.calls.clear()
    assert await svc.run_platform(queue.platforms[1]) == "succeeded"  # the last
    calls = list(store.calls)
    task_id = accepted.task_id
    view = svc.status(task_id)
    assert view.status is TaskStatus.COMPLETED  # before any aggregate delivery
    assert view.counters.done == 2 and len(view.results) == 10
    assert {r.platform for r in view.results} == {"a", "b"}  # both platforms' results, fused
    assert view.timeline.finalized_by == "fan_in"
    # The last worker's store calls: the claim (the task it read is the one it runs with), the
    # breaker's look, the cache, one transaction that counts it and finalizes, then the
    # breaker's record. No read of the task, no second transaction on it.
    transactions = [c for c in calls if c.startswith("transact")]
    assert transactions == ["transact claim", "transact fan_in"], calls
    assert "get_task" not in calls, calls
    # its answer is cached after it was counted, off the path to the final answer
    assert calls.index("put_cached") > calls.index("transact fan_in"), calls
    # Nothing is left to the aggregate task; a late one, the deadline's or a redelivered
    # platform task answer from a read and change nothing.
    assert fan_ins(svc.queue) == []
    final = svc.store.get_task(task_id)
    assert await svc.aggregate(AggregateMessage(task_id=task_id)) == "already_final"
    assert await svc.aggregate(AggregateMessage(task_id=task_id, deadline=True)) == (
        "already_final"
    )
    assert svc.store.get_task(task_id) == final  # nothing rewritten
    assert await svc.run_platform(queue.platforms[0]) == "skipped"
    assert fan_ins(svc.queue) == []


class Counting(SqliteStore):
    """SQLite that notes each call a run makes of it (`transact` by the rule it runs)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[str] = []

    def transact(self, task_id: str, names: Any, mutate: Mutator) -> Writes | None:
        self.calls.append(f"transact {rule_name(mutate)}")
        return super().transact(task_id, names, mutate)

    def get_task(self, task_id: str) -> Any:
        self.calls.append("get_task")
        return super().get_task(task_id)

    def put_cached(self, entry: Any) -> None:
        self.calls.append("put_cached")
        super().put_cached(entry)


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


class FanInFails(SqliteStore):
    """SQLite whose fan-in transactions fail (a store unreachable just then), `left` times."""

    def __init__(self, *args: Any, left: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.left = left

    def transact(self, task_id: str, names: Any, mutate: Mutator) -> Writes | None:
        if rule_name(mutate) == "fan_in" and names == ["b"] and self.left > 0:
            self.left -= 1
            raise ConnectionError("UNAVAILABLE: store briefly unreachable")
        return super().transact(task_id, names, mutate)


async def test_a_last_fan_in_that_cannot_commit_is_delivered_again_and_finalizes(
    settings: Settings,
) -> None:
    """The finalization rides in the fan-in's transaction: a failure loses neither (the
    delivery fails, its queue delivers it again, and that delivery counts and finalizes)."""
    now = [utcnow()]
    svc = service(settings, finalize_at_fan_in=True, store=FanInFails(settings.db_path, left=1))
    svc.clock = lambda: now[0]
    accepted = svc.start({"query": "q", "platform": "a,b"})
    queue: Any = svc.queue
    assert await svc.run_platform(queue.platforms[0]) == "succeeded"
    with pytest.raises(ConnectionError):  # b's fan-in: its queue will deliver it again
        await svc.run_platform(queue.platforms[1])
    assert svc.status(accepted.task_id).status is TaskStatus.RUNNING  # nothing half-written
    now[0] += timedelta(seconds=settings.lease_seconds + 1)  # the failed delivery's lease lapsed
    assert await svc.run_platform(queue.platforms[1]) == "succeeded"
    view = svc.status(accepted.task_id)
    assert view.status is TaskStatus.COMPLETED and view.counters.done == 2


def test_finalized_at_fan_in_is_for_modes_that_do_not_rerank() -> None:
    task = pending_task("t1", None, utcnow())
    assert lifecycle.finalized_at_fan_in(task)
    request = {"query": "q", "platform": "docs", "mode": "comprehensive"}
    reranking = task.model_copy(update={"request": SearchRequest.model_validate(request)})
    assert not lifecycle.finalized_at_fan_in(reranking)
