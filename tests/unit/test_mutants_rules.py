"""Claims of rules/ that its other unit tests left unasserted, each with the mutant it kills.

Found by mutation testing (`scripts/mutants rules`, docs/mutants.md): every test here names the
one-line change of the product code that made no other unit test fail (docs/contributing.md).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fanfuse.fusion.rerank import RerankOrder
from fanfuse.rules import (
    aggregate,
    breaker,
    filters,
    lifecycle,
    limits,
    progress,
    quota,
    spend,
    stats,
)
from fanfuse.rules.limits import Budget
from fanfuse.rules.mutations import Snapshot
from fanfuse.wire.errors import TaskConflict, TaskExpired
from fanfuse.wire.models import (
    BreakerState,
    CacheNote,
    CacheState,
    FailureKind,
    FusionMethod,
    Hit,
    LimitCut,
    PlatformHealth,
    PlatformRun,
    PlatformState,
    Progress,
    RerankNote,
    Result,
    SearchRequest,
    Stage,
    Task,
    TaskStatus,
)
from fanfuse.wire.options import CacheMode, OptionName, SearchOptions, TimeRange


def test_a_share_is_an_equal_part_of_the_cap_and_never_nothing() -> None:
    assert [limits.share(10, n) for n in (1, 3, 10, 20)] == [10, 3, 1, 1]
    assert limits.share(10, 0) == 10


def test_a_budget_spends_its_share_then_counts_what_it_refused() -> None:
    """Kills `take`'s `used >= cap` -> `>`, `skipped += 1` -> `= 1` or `+= 2`, `used += 1`
    dropped or changed, and the True/False answers swapped."""
    budget = Budget(2)
    assert [budget.take() for _ in range(5)] == [True, True, False, False, False]
    assert (budget.used, budget.skipped) == (2, 3)
    assert budget.cut() == LimitCut(cap=2, used=2, skipped=3)
    assert Budget(2).cut() is None


def test_a_budget_chooses_every_querys_best_ranked_pages_first() -> None:
    """Four pages of two queries, a share of three: both queries' first results, then the
    better second one by query order; the indices come back in their own order. Kills
    `choose`'s sort key changed (rank, query, index) and `sorted(chosen)` dropped."""
    hits = [
        Hit(url="https://x.org/q0-2", rank=2, query_index=0),
        Hit(url="https://x.org/q1-1", rank=1, query_index=1),
        Hit(url="https://x.org/q0-1", rank=1, query_index=0),
        Hit(url="https://x.org/q1-2", rank=2, query_index=1),
    ]
    budget = Budget(3)
    assert budget.choose(hits, [0, 1, 2, 3]) == [0, 1, 2]
    assert (budget.used, budget.skipped) == (3, 1)
    assert budget.choose(hits, []) == [] and budget.skipped == 1


def test_only_the_caps_that_cut_are_reported() -> None:
    spent, unused = Budget(1), Budget(5)
    spent.take(), spent.take(), unused.take()
    assert limits.cuts({"provider_calls": spent, "page_fetches": unused, "cost": None}) == {
        "provider_calls": LimitCut(cap=1, used=1, skipped=1)
    }


# -- lifecycle.py ---------------------------------------------------------------------------------

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def _searching(names: list[str], *, mode: str = "balanced", queries: int = 1) -> Task:
    request = SearchRequest.model_validate(
        {"query": [f"q{i}" for i in range(queries)], "platform": names, "mode": mode}
    )
    return Task(
        task_id="t",
        owner="key:alice",
        request=request,
        queries=request.queries,
        platforms=names,
        fusion=request.fusion or FusionMethod.RRF,
        status=TaskStatus.RUNNING,
        progress=Progress(percent=40.0, stage="searching", message="m"),
        created_at=NOW,
        updated_at=NOW,
        deadline_at=NOW + timedelta(seconds=30),
        expires_at=NOW + timedelta(minutes=30),
    )


def _run(name: str, index: int, state: PlatformState, **fields: Any) -> PlatformRun:
    return PlatformRun(task_id="t", name=name, index=index, of=2, state=state, **fields)


def test_a_cancel_ends_the_unfinished_runs_and_says_so_everywhere() -> None:
    """Kills `cancel`'s run message, the summary's results (0) and message, the task's status,
    cost, progress (percent kept, stage and message), updated_at and finalized_at keys."""
    task = _searching(["a", "b"])
    done = _run("a", 1, PlatformState.SUCCEEDED)
    running = _run("b", 2, PlatformState.RUNNING, lease="w1")
    writes = lifecycle.cancel(NOW)(Snapshot(task, {"a": done, "b": running}))
    assert writes is not None and writes.task is not None
    (ended,) = writes.runs
    assert (ended.name, ended.state) == ("b", PlatformState.CANCELLED)
    assert ended.message == "Platform 2/2 (b): Cancelled"
    final = writes.task
    assert final.status is TaskStatus.CANCELLED
    assert final.summary is not None
    assert (final.summary.total_results, final.summary.message) == (0, "Search cancelled")
    assert final.progress == Progress(percent=40.0, stage="cancelled", message="Search cancelled")
    assert final.updated_at == final.finalized_at == NOW
    assert final.cost == spend.receipt(task.cost, [done, ended])


def test_a_cancel_refuses_a_finished_or_expired_search_naming_it() -> None:
    """Kills `TaskExpired(task.task_id, task.owner)` with either argument lost, and
    `TaskConflict`'s message lost."""
    over = _searching(["a"]).model_copy(update={"status": TaskStatus.COMPLETED})
    with pytest.raises(TaskConflict, match="search t is already completed"):
        lifecycle.cancel(NOW)(Snapshot(over, {}))
    with pytest.raises(TaskExpired) as info:
        lifecycle.cancel(NOW + timedelta(hours=1))(Snapshot(_searching(["a"]), {}))
    assert (info.value.task_id, info.value.owner) == ("t", "key:alice")


def test_a_release_frees_only_the_holders_running_run() -> None:
    """Kills every mutant of `release`: the run looked up, the three conditions, the lease and
    its end cleared."""
    task = _searching(["a"])
    held = _run("a", 1, PlatformState.RUNNING, lease="w1", lease_until=NOW + timedelta(seconds=9))
    writes = lifecycle.release("a", "w1")(Snapshot(task, {"a": held}))
    assert writes is not None
    (freed,) = writes.runs
    assert (freed.lease, freed.lease_until, freed.state) == (None, None, PlatformState.RUNNING)
    assert lifecycle.release("a", "w2")(Snapshot(task, {"a": held})) is None
    assert lifecycle.release("b", "w1")(Snapshot(task, {"a": held})) is None
    ended = held.model_copy(update={"state": PlatformState.SUCCEEDED})
    assert lifecycle.release("a", "w1")(Snapshot(task, {"a": ended})) is None


def test_only_a_mode_that_reranks_leaves_its_finalization_to_the_aggregate_task() -> None:
    """Kills `finalized_at_fan_in`'s `not task.request.reranks` -> `task.request.reranks`."""
    assert lifecycle.finalized_at_fan_in(_searching(["a"], mode="balanced"))
    assert not lifecycle.finalized_at_fan_in(_searching(["a"], mode="comprehensive"))


# -- aggregate.py ---------------------------------------------------------------------------------


def _succeeded(name: str, index: int, n: int) -> PlatformRun:
    found = [
        Hit(url=f"https://{name}.org/{i}", title=f"{name} {i}", rank=i) for i in range(1, n + 1)
    ]
    return _run(name, index, PlatformState.SUCCEEDED, results=found)


def test_the_rerank_pool_is_fused_at_the_modes_depth() -> None:
    """Kills `candidates` fusing with no limit (`_fused(task, succeeded, None)`)."""
    task = _searching(["a", "b"], mode="comprehensive")
    depth = task.request.depth
    runs = [_succeeded("a", 1, depth), _succeeded("b", 2, depth)]
    (pool,) = aggregate.candidates(task, runs)
    assert len(pool.results) == depth < 2 * depth


def test_a_rerank_note_names_the_first_failure_and_counts_every_candidate() -> None:
    """Two queries reranked: the note is the failed one's, with both pools' candidates; none
    reranked: "no reranker ran". Kills `_apply_reranks`' `failed` list (None, inverted, never
    read, its second entry), the default note's fields, and the candidates' sum dropped."""
    task = _searching(["a", "b"], mode="comprehensive", queries=2)
    runs = [_succeeded("a", 1, 3), _succeeded("b", 2, 3)]
    ok = RerankNote(method="llm", applied=True, candidates=4)
    bad = RerankNote(method="llm", applied=False, candidates=2, error="timed out")
    orders = {0: RerankOrder(order=[], note=ok), 1: RerankOrder(order=[], note=bad)}
    note = aggregate.final_document(task, runs, NOW, orders).task.rerank
    assert note == bad.model_copy(update={"candidates": 6})
    both_ok = {0: RerankOrder(order=[], note=ok), 1: RerankOrder(order=[], note=ok)}
    note = aggregate.final_document(task, runs, NOW, both_ok).task.rerank
    assert note == ok.model_copy(update={"candidates": 8})
    none = aggregate.final_document(task, runs, NOW, {}).task.rerank
    assert none == RerankNote(method="none", applied=False, error="no reranker ran")


# -- breaker.py -----------------------------------------------------------------------------------


def test_a_failure_while_open_and_not_yet_due_changes_nothing_but_at_retry_at_it_counts() -> None:
    """Kills `on_failure`'s `state is OPEN and ...` -> `or`, `now < retry_at` -> `<=`, and the
    `updated_at` key misspelt."""
    opened = PlatformHealth(
        name="p",
        state=BreakerState.OPEN,
        retry_at=NOW + timedelta(seconds=30),
        consecutive_failures=3,
        updated_at=NOW - timedelta(minutes=1),
    )
    assert breaker.on_failure(opened, "p", FailureKind.ERROR, NOW) is None
    due = breaker.on_failure(opened, "p", FailureKind.ERROR, NOW + timedelta(seconds=30))
    assert due is not None and due.consecutive_failures == 4
    assert due.updated_at == NOW + timedelta(seconds=30)
    stale = opened.model_copy(update={"state": BreakerState.CLOSED, "consecutive_failures": 0})
    counted = breaker.on_failure(stale, "p", FailureKind.ERROR, NOW)
    assert counted is not None and counted.consecutive_failures == 1


def test_only_the_half_open_probes_holder_gives_it_back() -> None:
    """Kills `release_probe`'s `health is None or ...` -> `and`, and its probe_claimed_at and
    updated_at keys misspelt."""
    probing = PlatformHealth(
        name="p",
        state=BreakerState.HALF_OPEN,
        probe_token="tok",
        probe_claimed_at=NOW - timedelta(seconds=5),
        retry_at=NOW - timedelta(seconds=10),
        updated_at=NOW - timedelta(seconds=5),
    )
    back = breaker.release_probe(probing, "tok", NOW)
    assert back is not None
    assert (back.state, back.probe_token, back.probe_claimed_at) == (BreakerState.OPEN, None, None)
    assert back.updated_at == NOW and back.retry_at == probing.retry_at
    closed = probing.model_copy(update={"state": BreakerState.CLOSED})
    assert breaker.release_probe(closed, "tok", NOW) is None
    assert breaker.release_probe(probing, "other", NOW) is None
    assert breaker.release_probe(None, "tok", NOW) is None


# -- progress.py, quota.py, filters.py ------------------------------------------------------------


def test_a_stage_is_an_equal_share_and_its_progress_never_passes_it() -> None:
    """Kills `stage_percent`'s cap `1.0` -> `2.0`, `total > 0` -> `> 1`, and its rounding."""
    stages = [Stage.SEARCHING, Stage.RESOLVING, Stage.FETCHING_CONTENT]
    assert progress.stage_percent(stages, Stage.SEARCHING, 5, 2) == 33.33
    assert progress.stage_percent(stages, Stage.SEARCHING, 1, 1) == 33.33
    assert progress.stage_percent(stages, Stage.RESOLVING, 1, 3) == 44.44
    assert progress.stage_percent(stages, Stage.SEARCHING, 0, 0) == 0.0


def test_a_burst_given_is_the_burst_kept() -> None:
    """Kills `Limit.per_minute`'s `burst is None` -> `... or True` (the burst given ignored)."""
    assert quota.Limit.per_minute(60, burst=5).burst == 5
    assert quota.Limit.per_minute(60).burst == 60.0


def test_a_result_published_exactly_at_the_cutoff_is_kept() -> None:
    """Kills `_removes`' `published_at < cutoff` -> `<=`."""
    options = SearchOptions(time_range=TimeRange.DAY)
    at = Hit(url="https://x.org/a", published_at=NOW)
    before = Hit(url="https://x.org/b", published_at=NOW - timedelta(microseconds=1))
    assert not filters._removes(OptionName.TIME_RANGE, at, options, NOW)
    assert filters._removes(OptionName.TIME_RANGE, before, options, NOW)


# -- stats.py -------------------------------------------------------------------------------------


def _recorded(minutes_ago: float, *runs: PlatformRun, results: list[Result] | None = None) -> Any:
    created = NOW - timedelta(minutes=minutes_ago)
    task = _searching(["a", "b"]).model_copy(
        update={
            "created_at": created,
            "status": TaskStatus.COMPLETED if results is not None else TaskStatus.RUNNING,
            "results": results or [],
        }
    )
    return stats.Recorded(task=task, runs=runs)


def test_stats_count_every_search_in_the_window_whatever_the_order_read() -> None:
    """An old search read first, one exactly at the window's start, and the oldest counted
    read last; a result from a platform with no run. Kills `compute`'s `continue` -> `break`,
    the oldest not kept as the minimum, `setdefault(name, _Tally())` without the tally,
    `truncated` not passed on or True by default, and `in_window`'s `>=` -> `>`."""
    only_b = Result(
        rank=1,
        score=1.0,
        platform="b",
        platforms=["b"],
        ranks={"b": 1},
        url="https://b.org/1",
        title="b",
        retrieved_at=NOW,
    )
    searches = [
        _recorded(120),  # outside the hour
        _recorded(10, _run("a", 1, PlatformState.SUCCEEDED)),
        _recorded(60, results=[only_b]),  # exactly at `since`
        _recorded(30, _run("a", 1, PlatformState.SUCCEEDED)),
    ]
    got = stats.compute(searches, {}, now=NOW, window=timedelta(hours=1), scope="all")
    assert (got.searches, got.finished, got.truncated) == (3, 1, False)
    assert got.oldest == NOW - timedelta(minutes=60)
    by_name = {p.name: p for p in got.platforms}
    assert by_name["a"].runs == 2
    assert (by_name["b"].runs, by_name["b"].results, by_name["b"].unique_results) == (0, 1, 1)
    cut = stats.compute(
        searches, {}, now=NOW, window=timedelta(hours=1), scope="all", truncated=True
    )
    assert cut.truncated


def test_a_platforms_errors_and_cache_add_up_over_its_runs() -> None:
    """Kills `_Tally.add_run`'s error count read under None, the cache hits and misses
    overwritten instead of added, and the hit rate's rounding (1/3: 0.3333)."""
    failed = _run("a", 1, PlatformState.FAILED, failure=FailureKind.RATE_LIMITED)
    cached = [
        _run(
            "a",
            1,
            PlatformState.SUCCEEDED,
            cache=CacheNote(state=CacheState.HIT, mode=CacheMode.AUTO, hits=1),
        ),
        _run(
            "a",
            1,
            PlatformState.SUCCEEDED,
            cache=CacheNote(state=CacheState.PARTIAL, mode=CacheMode.AUTO, misses=2),
        ),
    ]
    searches = [_recorded(5, failed), _recorded(6, failed), *(_recorded(7, run) for run in cached)]
    got = stats.compute(searches, {}, now=NOW, window=timedelta(hours=1), scope="all")
    (alpha,) = got.platforms
    assert alpha.errors == {"rate_limited": 2}
    assert alpha.cache_hit_rate == 0.3333
