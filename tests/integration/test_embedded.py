"""The embedded runtime end to end: real service, real SQLite store, in-process queue."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from fanfuse.fronts.serve.app import create_app
from fanfuse.http.backend import EmbeddedBackend, open_backend
from fanfuse.platforms import Registry
from fanfuse.queue.port import AggregateMessage, PlatformMessage
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.service.service import DEADLINE_GRACE
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.errors import LeaseHeld, ProviderError
from fanfuse.wire.models import PlatformState, TaskStatus, TaskView, utcnow
from tests.support.fakes import FakePlatform, hits


def registry(*platforms: FakePlatform) -> Registry:
    return Registry.of(platforms)


async def test_two_platforms_complete_with_fused_results(settings: Settings) -> None:
    shared = hits("shared", 1)
    a = FakePlatform("alpha", [*shared, *hits("a", 4)])
    b = FakePlatform("beta", [*shared, *hits("b", 4)])
    seen: list[TaskView] = []
    async with EmbeddedRuntime(settings, registry=registry(a, b)) as rt:
        view = await rt.search({"query": "q", "max_results": 6}, on_update=seen.append)
    assert view.status is TaskStatus.COMPLETED
    assert len(view.results) == 6
    top = view.results[0]
    assert top.url == "https://example.com/shared/1"
    assert top.platforms == ["alpha", "beta"] and top.ranks == {"alpha": 1, "beta": 1}
    assert view.counters.done == 2 and view.counters.failed == 0
    assert view.summary is not None
    assert view.summary.message == (
        "Multi-platform search completed: 2/2 platforms, 6 total results (0 failed)"
    )
    assert view.progress.percent == 100
    runs = {r.name: r for r in view.platform_runs}
    assert runs["alpha"].message == "Platform 1/2 (alpha): Searching: Found 5 results"
    assert runs["beta"].stage == "beta_searching"
    assert all(0 <= v.progress.percent <= 100 for v in seen)


async def test_single_platform_keeps_plain_messages(settings: Settings) -> None:
    async with EmbeddedRuntime(settings, registry=registry(FakePlatform("docs"))) as rt:
        view = await rt.search({"query": "q"})
    run = view.platform_runs[0]
    assert run.stage == "searching"
    assert run.message == "Searching: Found 5 results"
    assert view.summary is not None and view.summary.message == "Search completed: 5 results"


async def test_one_failing_platform_gives_partial(settings: Settings) -> None:
    good = FakePlatform("good")
    bad = FakePlatform("bad", error=ProviderError("bad", "HTTP 500 after 3 attempts"))
    async with EmbeddedRuntime(settings, registry=registry(good, bad)) as rt:
        view = await rt.search({"query": "q"})
    assert view.status is TaskStatus.PARTIAL
    assert [r.platform for r in view.results] == ["good"] * 5
    assert [(e.platform, e.state, e.error) for e in view.errors] == [
        ("bad", PlatformState.FAILED, "bad: HTTP 500 after 3 attempts")
    ]
    assert view.counters.done == 2 and view.counters.failed == 1
    assert view.summary is not None and "(1 failed)" in view.summary.message


async def test_all_failing_gives_failed_with_aggregated_error(settings: Settings) -> None:
    a = FakePlatform("a", error=ProviderError("a", "invalid API key (HTTP 401)"))
    b = FakePlatform("b", error=RuntimeError("boom"))
    async with EmbeddedRuntime(settings, registry=registry(a, b)) as rt:
        view = await rt.search({"query": "q"})
    assert view.status is TaskStatus.FAILED
    assert view.results == []
    assert view.error is not None
    assert view.error.startswith("All 2 platforms failed: a: a: invalid API key (HTTP 401)")
    assert "b: b: RuntimeError('boom')" in view.error


async def test_platforms_run_concurrently(settings: Settings) -> None:
    """Each platform waits at a barrier for all three: run one after another, none finishes."""
    barrier = asyncio.Barrier(3)
    platforms = [FakePlatform(n, barrier=barrier) for n in ("a", "b", "c")]
    async with EmbeddedRuntime(settings, registry=registry(*platforms)) as rt:
        view = await rt.search({"query": "q"})
    assert view.status is TaskStatus.COMPLETED


async def test_running_or_aggregating_twice_changes_nothing(settings: Settings) -> None:
    a, b = FakePlatform("a"), FakePlatform("b")
    async with EmbeddedRuntime(settings, registry=registry(a, b)) as rt:
        view = await rt.search({"query": "q"})
        svc = rt.service
        before = svc.status(view.task_id).model_dump()
        assert await svc.run_platform(PlatformMessage(task_id=view.task_id, platform="a")) == (
            "skipped"
        )
        assert await svc.aggregate(AggregateMessage(task_id=view.task_id)) == "already_final"
        assert await svc.aggregate(AggregateMessage(task_id=view.task_id, deadline=True)) == (
            "already_final"
        )
        assert svc.status(view.task_id).model_dump() == before
    assert (a.calls, b.calls) == (1, 1)


async def test_duplicate_deliveries_count_once(settings: Settings) -> None:
    """The same platform task delivered again while the first runs: the duplicate is refused
    (retryable, its lease is live) and calls no provider; one result set, exact counters."""
    gate = asyncio.Event()
    a = FakePlatform("a", gate=gate)
    b = FakePlatform("b")
    async with EmbeddedRuntime(settings, registry=registry(a, b)) as rt:
        accepted = rt.service.start({"query": "q"})
        message = PlatformMessage(task_id=accepted.task_id, platform="a")
        # A redelivery while the first attempt is still running (the worker looked dead).
        await asyncio.sleep(0.05)
        with pytest.raises(LeaseHeld):
            await rt.service.run_platform(message)
        gate.set()
        view = await rt.wait(accepted.task_id)
    assert a.calls == 1
    assert view.counters.done == 2
    run_a = next(r for r in view.platform_runs if r.name == "a")
    assert run_a.attempt == 1
    assert len(run_a.results) == 5
    assert len(view.results) == 10


async def test_cancel_while_running(settings: Settings) -> None:
    gate = asyncio.Event()
    slow = FakePlatform("slow", gate=gate)
    fast = FakePlatform("fast")
    async with EmbeddedRuntime(settings, registry=registry(slow, fast)) as rt:
        accepted = rt.service.start({"query": "q"})
        await asyncio.sleep(0.1)
        cancelled = rt.service.cancel(accepted.task_id)
        gate.set()
        await asyncio.sleep(0.1)
        view = rt.service.status(accepted.task_id)
    assert cancelled.status is TaskStatus.CANCELLED
    assert view.status is TaskStatus.CANCELLED
    run = next(r for r in view.platform_runs if r.name == "slow")
    assert run.state is PlatformState.CANCELLED and run.results == []
    assert view.results == []


async def test_cancel_twice_is_a_conflict(settings: Settings) -> None:
    import pytest

    from fanfuse.wire.errors import TaskConflict, TaskNotFound

    async with EmbeddedRuntime(settings, registry=registry(FakePlatform("a"))) as rt:
        view = await rt.search({"query": "q"})
        with pytest.raises(TaskConflict, match="already completed"):
            rt.service.cancel(view.task_id)
        with pytest.raises(TaskNotFound):
            rt.service.status("nope")


async def test_deadline_times_out_a_platform_that_never_reports(tmp_path: object) -> None:
    settings = Settings(db_path=f"{tmp_path}/f.db", deadline_seconds=0.5, progress_interval=0)
    never = FakePlatform("never", gate=asyncio.Event())
    ok = FakePlatform("ok")
    async with EmbeddedRuntime(settings, registry=registry(never, ok)) as rt:
        view = await asyncio.wait_for(rt.search({"query": "q"}), 10)
    assert view.status is TaskStatus.PARTIAL
    states = {r.name: r.state for r in view.platform_runs}
    assert states == {"never": PlatformState.TIMED_OUT, "ok": PlatformState.SUCCEEDED}
    assert [e.platform for e in view.errors] == ["never"]


async def test_a_worker_alive_at_the_deadline_finalizes_before_the_deadline_task(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slow worker times itself out at the deadline and its fan-in finalizes; the deadline
    task comes DEADLINE_GRACE later and finds nothing to do. Fired together, the two would
    transact on the task document at once (2 s lost to the Firestore emulator's lock timeout)."""
    slow, fast = FakePlatform("slow", delay=30), FakePlatform("fast")
    outcomes: list[tuple[bool, str]] = []
    async with EmbeddedRuntime(settings, registry=registry(slow, fast)) as rt:
        aggregate = rt.service.aggregate

        async def recording(message: AggregateMessage) -> str:
            outcome = await aggregate(message)
            outcomes.append((message.deadline, outcome))
            return outcome

        monkeypatch.setattr(rt.service, "aggregate", recording)
        view = await asyncio.wait_for(rt.search({"query": "q", "timeout_s": 0.5}), 10)
        assert view.status is TaskStatus.PARTIAL
        assert outcomes == [(False, "partial")]  # the fan-in's aggregate
        await asyncio.sleep(DEADLINE_GRACE.total_seconds() + 0.2)
        assert outcomes == [(False, "partial"), (True, "already_final")]
    assert {r.name: r.state for r in view.platform_runs}["slow"] is PlatformState.TIMED_OUT


async def test_restart_keeps_a_finished_task(settings: Settings) -> None:
    async with EmbeddedRuntime(settings, registry=registry(FakePlatform("a"))) as rt:
        view = await rt.search({"query": ["one", "two"]})
    store = SqliteStore(settings.db_path)
    try:
        task = store.get_task(view.task_id)
        assert task is not None and task.status is TaskStatus.COMPLETED
        assert task.results == view.results
        assert [q.query for q in task.results_by_query] == ["one", "two"]
    finally:
        store.close()
    async with EmbeddedRuntime(settings, registry=registry(FakePlatform("a"))) as rt:
        again = rt.service.status(view.task_id)
    assert again.model_dump(exclude={"platform_runs"}) == view.model_dump(exclude={"platform_runs"})


async def test_restart_resumes_an_unfinished_task(settings: Settings) -> None:
    """A resident process that died mid-search leaves it queued; its next start finishes it."""
    gate = asyncio.Event()
    first = registry(FakePlatform("a", gate=gate))
    async with EmbeddedRuntime(settings, registry=first, resident=True) as rt:
        accepted = rt.service.start({"query": "q"})
        await asyncio.sleep(0.05)
    async with EmbeddedRuntime(settings, registry=registry(FakePlatform("a"))) as rt:
        await asyncio.sleep(0.05)  # not resident: it resumes nothing
        assert not rt.status(accepted.task_id).status.terminal
    async with EmbeddedRuntime(settings, registry=registry(FakePlatform("a")), resident=True) as rt:
        view = await asyncio.wait_for(rt.wait(accepted.task_id), 10)
    assert view.status is TaskStatus.COMPLETED
    assert view.platform_runs[0].attempt == 2


async def test_a_resident_runtime_resumes_none_of_the_searches_it_did_not_start(
    settings: Settings,
) -> None:
    gate = asyncio.Event()
    async with EmbeddedRuntime(settings, registry=registry(FakePlatform("a", gate=gate))) as rt:
        accepted = rt.service.start({"query": "q"})
        await asyncio.sleep(0.05)
    async with EmbeddedRuntime(settings, registry=registry(FakePlatform("a")), resident=True) as rt:
        assert rt.service.resume_unfinished() == 0
        await asyncio.sleep(0.05)
        assert rt.status(accepted.task_id).platform_runs[0].attempt == 1


async def test_the_mcp_backend_and_serve_are_resident_the_python_api_is_not(
    settings: Settings,
) -> None:
    """Who resumes is decided where the runtime is opened: serve and mcp, not a script."""
    async with open_backend(None, settings) as backend:
        assert isinstance(backend, EmbeddedBackend) and backend.runtime.resident
    app = create_app(settings, warm=[])
    async with app.router.lifespan_context(app):
        assert app.state.runtime.resident
    async with EmbeddedRuntime(settings) as rt:
        assert not rt.resident


async def test_expired_tasks_are_purged(settings: Settings) -> None:
    async with EmbeddedRuntime(settings, registry=registry(FakePlatform("a"))) as rt:
        view = await rt.search({"query": "q"})
    store = SqliteStore(settings.db_path)
    assert store.purge_expired(utcnow()) == 0
    assert store.purge_expired(view.expires_at + timedelta(seconds=1)) == 1
    assert store.get_task(view.task_id) is None and store.get_runs(view.task_id) == []
    store.close()


async def test_content_is_stored_apart_and_returned(settings: Settings) -> None:
    page = hits("p", 2)
    page = [h.model_copy(update={"content": f"full text of {h.url}"}) for h in page]
    async with EmbeddedRuntime(settings, registry=registry(FakePlatform("a", page))) as rt:
        view = await rt.search({"query": "q", "include_content": True})
        run = rt.service.store.get_runs(view.task_id)[0]
    assert all(h.content is None and h.content_id for h in run.results)
    assert [r.content for r in view.results] == [f"full text of {h.url}" for h in page]
