"""Claims of rules/ that its other unit tests left unasserted, each with the mutant it kills.

Found by mutation testing (`scripts/mutants rules`, docs/mutants.md): every test here names the
one-line change of the product code that made no other unit test fail (docs/contributing.md).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fanfuse.fusion.rerank_contract import RerankOrder
from fanfuse.rules import (
    aggregate,
    breaker,
    filters,
    health,
    lifecycle,
    limits,
    progress,
    quota,
    spend,
    stats_figures,
)
from fanfuse.rules.limits import Budget
from fanfuse.rules.mutations import Snapshot, health_swap
from fanfuse.wire.errors import LeaseHeld, TaskConflict, TaskExpired
from fanfuse.wire.models import (
    BreakerState,
    CacheNote,
    CacheState,
    CallRecord,
    Counters,
    FailureKind,
    FusionMethod,
    Hit,
    LimitCut,
    PlatformHealth,
    PlatformRun,
    PlatformState,
    Progress,
    QueryFailure,
    QuotaBucket,
    RerankNote,
    Result,
    SearchRequest,
    Stage,
    StepProgress,
    Task,
    TaskStatus,
)
from fanfuse.wire.options import (
    Applied,
    CacheMode,
    OptionName,
    OptionUse,
    SearchOptions,
    TimeRange,
)


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
    assert Budget(2).choose(hits, [0, 1, 2, 3]) == [1, 2]  # the two first results, not 0 and 1


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
        updated_at=NOW - timedelta(minutes=1),
        deadline_at=NOW + timedelta(seconds=30),
        expires_at=NOW + timedelta(minutes=30),
    )


def _run(name: str, index: int, state: PlatformState, **fields: Any) -> PlatformRun:
    return PlatformRun(task_id="t", name=name, index=index, state=state, **{"of": 2, **fields})


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


# -- stats_figures.py ------------------------------------------------------------------------------


def _recorded(minutes_ago: float, *runs: PlatformRun, results: list[Result] | None = None) -> Any:
    created = NOW - timedelta(minutes=minutes_ago)
    task = _searching(["a", "b"]).model_copy(
        update={
            "created_at": created,
            "status": TaskStatus.COMPLETED if results is not None else TaskStatus.RUNNING,
            "results": results or [],
        }
    )
    return stats_figures.Recorded(task=task, runs=runs)


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
    got = stats_figures.compute(searches, {}, now=NOW, window=timedelta(hours=1), scope="all")
    assert (got.searches, got.finished, got.truncated) == (3, 1, False)
    assert got.oldest == NOW - timedelta(minutes=60)
    by_name = {p.name: p for p in got.platforms}
    assert by_name["a"].runs == 2
    assert (by_name["b"].runs, by_name["b"].results, by_name["b"].unique_results) == (0, 1, 1)
    cut = stats_figures.compute(
        searches, {}, now=NOW, window=timedelta(hours=1), scope="all", truncated=True
    )
    assert cut.truncated


def test_a_platforms_errors_and_cache_add_up_over_its_runs() -> None:
    """Kills `_Tally.add_run`'s error count read under None, the cache hits and misses
    overwritten instead of added, and the hit rate's rounding (1/7: 0.1429)."""
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
        _run(
            "a",
            1,
            PlatformState.SUCCEEDED,
            cache=CacheNote(state=CacheState.MISS, mode=CacheMode.AUTO, misses=4),
        ),
    ]
    searches = [_recorded(5, failed), _recorded(6, failed), *(_recorded(7, run) for run in cached)]
    got = stats_figures.compute(searches, {}, now=NOW, window=timedelta(hours=1), scope="all")
    (alpha,) = got.platforms
    assert alpha.errors == {"rate_limited": 2}
    assert alpha.cache_hit_rate == 0.1429  # 1 hit, 6 misses


# -- the final document and the preview ------------------------------------------------------------


def _three(task: Task) -> list[PlatformRun]:
    """a succeeded (a post-filter removed 2, another applied natively, one query failed), b
    failed, c still running."""
    a = _succeeded("a", 1, 3).model_copy(
        update={
            "of": 3,
            "options": {
                "exclude_domains": OptionUse(applied=Applied.POST_FILTER, removed=2),
                "time_range": OptionUse(applied=Applied.NATIVE),
                "country": OptionUse(applied=Applied.NOT_APPLIED, removed=5),
            },
            "failed_queries": [
                QueryFailure(platform="a", query_index=0, query="q0", error="x"),
                QueryFailure(platform="a", query_index=2, query="q2", error="x"),  # no such
            ],
        }
    )
    b = _run("b", 2, PlatformState.FAILED, of=3, error="HTTP 500")
    c = _run("c", 3, PlatformState.RUNNING, of=3)
    return [a, b, c]


def test_the_final_document_says_what_failed_what_was_filtered_and_when() -> None:
    """Kills `final_document`'s straggler message and error, the errors' condition and keys, the
    query failures' placing (first query included, none past the last), the error left ""
    or set on a partial search, `filtered` and `filtered_totals` (not applied: not counted,
    added up from 0), cost, progress, updated_at and finalized_at."""
    task = _searching(["a", "b", "c"], queries=2)
    final = aggregate.final_document(task, _three(task), NOW)
    (straggler,) = final.ended
    assert straggler.message == "Platform 3/3 (c): Timed out"
    assert straggler.error == aggregate.DEADLINE_ERROR
    doc = final.task
    assert doc.status is TaskStatus.PARTIAL and doc.error is None
    assert [(e.platform, e.state, e.error) for e in doc.errors] == [
        ("b", PlatformState.FAILED, "HTTP 500"),
        ("c", PlatformState.TIMED_OUT, aggregate.DEADLINE_ERROR),
    ]
    assert [[f.query for f in q.failed] for q in doc.results_by_query] == [["q0"], []]
    assert doc.filtered == {"exclude_domains": 2, "time_range": 0}
    assert aggregate.filtered_totals([_three(task)[0], _three(task)[0]]) == {
        "exclude_domains": 4,
        "time_range": 0,
    }
    assert doc.summary is not None
    assert doc.progress == Progress(percent=100.0, stage="partial", message=doc.summary.message)
    assert doc.updated_at == doc.finalized_at == NOW
    a, b, _ = _three(task)
    assert doc.cost == spend.receipt(task.cost, [a, b, straggler])


def test_every_platform_failed_is_one_error_naming_each() -> None:
    """Kills the failed search's error (`status is FAILED` inverted, the message dropped, its
    separator changed)."""
    task = _searching(["a", "b"])
    runs = [
        _run("a", 1, PlatformState.FAILED, error="HTTP 401"),
        _run("b", 2, PlatformState.FAILED, error="HTTP 500"),
    ]
    doc = aggregate.final_document(task, runs, NOW).task
    assert doc.status is TaskStatus.FAILED
    assert doc.error == "All 2 platforms failed: a: HTTP 401; b: HTTP 500"


def test_one_query_has_no_per_query_lists_in_the_final_document_nor_in_the_preview() -> None:
    """Kills `results_by_query`'s `len(task.queries) > 1` -> `>= 1` or always, in both."""
    task = _searching(["a", "b"])
    runs = [_succeeded("a", 1, 2), _run("b", 2, PlatformState.RUNNING)]
    assert aggregate.final_document(task, runs, NOW).task.results_by_query == []
    preview = aggregate.preview(task, runs)
    assert preview is not None and preview.results_by_query == [] and preview.results


def test_the_preview_lists_each_query_failure_under_its_query() -> None:
    """Kills `preview`'s query index bounds (`0 <=` -> `1 <=` or `0 <`, `<` -> `<=`)."""
    task = _searching(["a", "b", "c"], queries=2)
    a, _, c = _three(task)
    late = QueryFailure(platform="a", query_index=2, query="q2", error="x")  # no such query
    a = a.model_copy(update={"failed_queries": [*a.failed_queries, late]})
    preview = aggregate.preview(task, [a, c])
    assert preview is not None
    assert [[f.query for f in q.failed] for q in preview.results_by_query] == [["q0"], []]


def test_the_weights_of_the_request_reach_the_fusion() -> None:
    """Kills `_fused` passing no weights (None, or left out)."""
    task = _searching(["a", "b"])
    weighted = task.model_copy(
        update={"request": task.request.model_copy(update={"weights": {"a": 0.0, "b": 1.0}})}
    )
    runs = [_succeeded("a", 1, 1), _succeeded("b", 2, 1)]
    assert [r.url for r in aggregate.final_document(task, runs, NOW).task.results] == [
        "https://a.org/1",
        "https://b.org/1",
    ]
    assert aggregate.final_document(weighted, runs, NOW).task.results[0].url == "https://b.org/1"


# -- lifecycle.finalize, progress, mutations, quota keys -------------------------------------------


def test_a_search_is_finalized_once_its_platforms_ended_or_at_its_deadline() -> None:
    """Kills `finalization_due`'s terminal answer (True), `running` (None), `now >= deadline`
    -> `>`, and `finalize` passing no `now` or no `reranked` on."""
    task = _searching(["a", "b"])
    ended = [_succeeded("a", 1, 1), _run("b", 2, PlatformState.FAILED, error="x")]
    running = [_succeeded("a", 1, 1), _run("b", 2, PlatformState.RUNNING)]
    over = task.model_copy(update={"status": TaskStatus.COMPLETED})
    assert not lifecycle.finalization_due(over, ended, NOW, force=True)
    assert lifecycle.finalization_due(task, ended, NOW, force=False)
    assert not lifecycle.finalization_due(task, running, NOW, force=False)
    assert lifecycle.finalization_due(task, running, task.deadline_at, force=False)
    snap = Snapshot(task, {r.name: r for r in running})
    assert lifecycle.finalize(NOW, force=False)(snap) is None
    late = lifecycle.finalize(task.deadline_at, force=False)(snap)
    assert late is not None and late.task is not None and late.task.finalized_at == task.deadline_at
    deep = _searching(["a", "b"], mode="comprehensive")
    note = RerankNote(method="llm", applied=True, candidates=1)
    orders = {0: RerankOrder(order=["https://a.org/1"], note=note)}
    writes = lifecycle.finalize(NOW, force=True, reranked=orders)(
        Snapshot(deep, {r.name: r for r in ended})
    )
    assert writes is not None and writes.task is not None
    assert writes.task.rerank == note


def test_the_live_progress_is_the_mean_and_the_latest_platforms_words() -> None:
    """Kills every mutant of `progress.merged`."""
    stored = Progress(percent=0.0, stage="pending", message="Queued")
    queued = [_run("a", 1, PlatformState.QUEUED), _run("b", 2, PlatformState.QUEUED)]
    assert progress.merged(queued, stored) == stored
    early = _run("a", 1, PlatformState.RUNNING, percent=50.0, stage="a_searching", message="m-a")
    later = _run("b", 2, PlatformState.SUCCEEDED, stage="b_done", message="m-b")
    early = early.model_copy(update={"updated_at": NOW})
    later = later.model_copy(update={"updated_at": NOW + timedelta(seconds=1)})
    assert progress.merged([early, later], stored) == Progress(
        percent=75.0, stage="b_done", message="m-b"
    )
    assert progress.merged([later, early], stored).message == "m-b"


def test_the_summary_counts_what_did_not_answer_and_the_failed_queries() -> None:
    """Kills `summarize`'s single-platform message (failed: its error, else its state), the
    unanswered count (failed + suspended), the failed queries (of succeeded runs only) and
    their clause."""
    failed = _run("a", 1, PlatformState.FAILED, error="boom")
    assert progress.summarize([failed], 0).message == "Search failed: boom"
    silent = _run("a", 1, PlatformState.FAILED)
    assert progress.summarize([silent], 0).message == "Search failed: failed"
    one = QueryFailure(platform="a", query_index=0, query="q0", error="x")
    two = QueryFailure(platform="a", query_index=1, query="q1", error="x")
    ok = _run("a", 1, PlatformState.SUCCEEDED, failed_queries=[one, two])
    gone = _run("b", 2, PlatformState.FAILED, failed_queries=[one])
    down = _run("c", 3, PlatformState.SUSPENDED)
    summary = progress.summarize([ok, gone, down], 4)
    assert (summary.failed, summary.failed_queries) == (2, 2)
    assert summary.message.endswith("(2 failed); 2 queries failed on a platform")
    assert progress.summarize([ok.model_copy(update={"failed_queries": [one]})], 3).message == (
        "Search completed: 3 results; 1 query failed on a platform"
    )


def test_a_health_swap_writes_the_change_and_answers_the_document_as_stored() -> None:
    """Kills every mutant of `mutations.health_swap`."""
    stored = PlatformHealth(name="p", updated_at=NOW)
    changed = stored.model_copy(update={"consecutive_failures": 1})
    swap = health_swap(lambda h: changed if h is stored else None)
    assert swap(stored) == (changed, changed)
    assert health_swap(lambda h: None)(stored) == (None, stored)


def test_a_bucket_key_keeps_an_email_and_hashes_only_what_is_too_long() -> None:
    """Kills `bucket_key`'s safe characters changed and `len > KEY_CHARS` -> `>=`."""
    assert quota.bucket_key("key:ann@x.org") == "key%3Aann@x.org"
    exact = "a" * quota.KEY_CHARS
    assert quota.bucket_key(exact) == exact
    assert quota.bucket_key(exact + "a").startswith("sha256-")


def test_a_bucket_within_rounding_of_a_whole_token_admits() -> None:
    """The refill is float arithmetic: a token short by EPSILON is a whole one. Kills `take`'s
    `tokens + EPSILON >= 1` -> `>`."""
    limit = quota.Limit.per_minute(60)
    bucket = QuotaBucket(tokens=1 - quota.EPSILON, updated_at=NOW, expires_at=NOW)
    written, wait = quota.take(bucket, limit, NOW)
    assert wait is None and written is not None and written.tokens == 0.0
    short = bucket.model_copy(update={"tokens": 1 - 3 * quota.EPSILON})
    assert quota.take(short, limit, NOW)[0] is None


def test_an_ended_run_is_complete_stamped_and_framed() -> None:
    """Kills `ended_run`'s error, percent (100), message (its index, count and name) and
    finished_at/updated_at keys."""
    run = _run("b", 2, PlatformState.RUNNING, of=3, percent=40.0, updated_at=NOW - timedelta(1))
    ended = aggregate.ended_run(run, PlatformState.FAILED, "HTTP 500", "Failed", NOW)
    assert (ended.state, ended.error, ended.percent) == (PlatformState.FAILED, "HTTP 500", 100.0)
    assert ended.message == "Platform 2/3 (b): Failed"
    assert ended.finished_at == ended.updated_at == NOW


def test_a_late_outcome_after_the_search_ended_only_closes_the_run() -> None:
    """A worker reporting after a cancel or a forced finalization: its run ends cancelled or
    timed out, with nothing of its outcome. Kills `finish`'s branch on the terminal task (the
    state chosen, the cancelled run left alone, the run written)."""
    outcome = lifecycle.Outcome(state=PlatformState.SUCCEEDED)
    held = _run("a", 1, PlatformState.RUNNING, lease="w1")
    for status, state in (
        (TaskStatus.CANCELLED, PlatformState.CANCELLED),
        (TaskStatus.PARTIAL, PlatformState.TIMED_OUT),
    ):
        task = _searching(["a"]).model_copy(update={"status": status})
        writes = lifecycle.finish("a", outcome, NOW, "w1")(Snapshot(task, {"a": held}))
        assert writes is not None and writes.task is None
        (ended,) = writes.runs
        assert (ended.state, ended.message) == (
            state,
            "Platform 1/2 (a): Stopped: search already finished",
        )
        assert ended.finished_at == ended.updated_at == NOW
    cancelled = held.model_copy(update={"state": PlatformState.CANCELLED})
    task = _searching(["a"]).model_copy(update={"status": TaskStatus.CANCELLED})
    assert lifecycle.finish("a", outcome, NOW, "w1")(Snapshot(task, {"a": cancelled})) is None


def test_the_breaker_stamps_every_change() -> None:
    """Kills the `updated_at` keys of `claim_probe` and `on_success`."""
    due = PlatformHealth(
        name="p",
        state=BreakerState.OPEN,
        retry_at=NOW - timedelta(seconds=1),
        consecutive_failures=3,
        updated_at=NOW - timedelta(minutes=5),
    )
    probing = breaker.claim_probe(due, "tok", NOW)
    assert probing is not None and probing.updated_at == NOW
    closed = breaker.on_success(due, NOW)
    assert closed is not None and closed.updated_at == NOW


def test_a_latency_sample_moves_the_average_by_alpha_and_is_stamped() -> None:
    """Kills `observed`'s updated_at keys and `(1 - ALPHA) * previous` -> `/`."""
    breaker_only = PlatformHealth(name="p", updated_at=NOW - timedelta(hours=1))
    seeded = health.observed(breaker_only, "p", 2.0, NOW)
    assert seeded is not None and seeded.updated_at == NOW and seeded.latency_s == 2.0
    first = health.observed(None, "p", 2.0, NOW)
    assert first is not None and (first.latency_s, first.samples, first.updated_at) == (2.0, 1, NOW)
    later = NOW + timedelta(minutes=1)
    second = health.observed(first, "p", 4.0, later)
    assert second is not None and second.updated_at == later and second.samples == 2
    assert second.latency_s == pytest.approx(0.3 * 4.0 + 0.7 * 2.0)


def test_the_fan_in_counts_and_its_progress() -> None:
    """Kills `add_ended`'s failed count (dropped or subtracted), `at_fan_in` (the percents of
    the ended and the waiting platforms, the stage and message kept) and `mean_percent`
    (nothing is 0, the rounding)."""
    counters = Counters(done=1, failed=1)
    failed = _run("b", 2, PlatformState.FAILED, error="x")
    assert progress.add_ended(counters, [failed]) == Counters(done=2, failed=2)
    ended = _run("b", 2, PlatformState.SUCCEEDED, stage="b_searching", message="m")
    assert progress.at_fan_in(1, 3, ended) == Progress(
        percent=33.33, stage="b_searching", message="m"
    )
    assert progress.mean_percent([]) == 0.0
    assert progress.mean_percent([10.0, 0.0, 0.0]) == 3.33


def test_an_option_that_removed_nothing_says_zero() -> None:
    """Kills `post_filter`'s `removed.get(name, 0)` -> `get(name, 1)`."""
    hits = [[Hit(url="https://x.org/a")]]
    options = SearchOptions(exclude_domains=["y.org"], time_range=TimeRange.DAY)
    filtered = filters.post_filter(hits, options, (OptionName.TIME_RANGE,), NOW)
    assert filtered.uses["exclude_domains"] == OptionUse(applied=Applied.POST_FILTER, removed=0)
    assert filtered.uses["time_range"] == OptionUse(applied=Applied.NATIVE, removed=0)


def test_a_claim_starts_the_run_afresh_and_a_live_lease_is_named_when_refused() -> None:
    """Kills `claim`'s LeaseHeld message, and its stage, progress (0 of 0), percent, message,
    started_at (kept from the first attempt) and updated_at."""
    task = _searching(["a", "b"])
    first_start = NOW - timedelta(minutes=1)
    lapsed = _run(
        "b",
        2,
        PlatformState.RUNNING,
        lease="w1",
        lease_until=NOW - timedelta(seconds=1),
        percent=60.0,
        stage="b_fetching_content",
        message="old",
        started_at=first_start,
        progress=StepProgress(current=3, total=5),
    )
    writes = lifecycle.claim("b", NOW, "w2", lease=timedelta(seconds=30))(
        Snapshot(task, {"b": lapsed})
    )
    assert writes is not None
    (run,) = writes.runs
    assert (run.stage, run.percent, run.lease, run.attempt) == ("b_searching", 0.0, "w2", 1)
    assert (run.progress.current, run.progress.total) == (0, 0)
    assert run.message == "Platform 2/2 (b): Searching: querying"
    assert (run.started_at, run.updated_at) == (first_start, NOW)
    fresh = _run("b", 2, PlatformState.QUEUED)
    claimed = lifecycle.claim("b", NOW, "w2", lease=timedelta(seconds=30))(
        Snapshot(task, {"b": fresh})
    )
    assert claimed is not None and claimed.runs[0].started_at == NOW
    alone = _run("b", 1, PlatformState.QUEUED, of=1)  # one platform: plain stage names
    claimed = lifecycle.claim("b", NOW, "w2", lease=timedelta(seconds=30))(
        Snapshot(task, {"b": alone})
    )
    assert claimed is not None and claimed.runs[0].stage == "searching"
    with pytest.raises(LeaseHeld, match="b of t is leased to another delivery"):
        lifecycle.claim("b", NOW, "w3", lease=timedelta(seconds=30))(Snapshot(task, {"b": run}))


def test_the_fan_in_records_the_whole_outcome_and_the_tasks_progress() -> None:
    """Kills `finish`'s message (the outcome's, else found/failed), the error, every outcome
    field's key, and the task's status, progress and updated_at."""
    task = _searching(["a", "b"])
    held = _run("a", 1, PlatformState.RUNNING, lease="w1", timings={"queued": 0.5})
    call = CallRecord(platform="a", status=200)
    use = OptionUse(applied=Applied.NATIVE)
    failure = QueryFailure(platform="a", query_index=0, query="q0", error="x")
    note = CacheNote(state=CacheState.MISS, mode=CacheMode.AUTO, misses=1)
    outcome = lifecycle.Outcome(
        state=PlatformState.SUCCEEDED,
        results=[Hit(url="https://a.org/1", rank=1)],
        provider="p-1",
        timings={"searching": 1.5},
        calls=[call],
        options={"time_range": use},
        failed_queries=[failure],
        cache=note,
    )
    pending = task.model_copy(update={"status": TaskStatus.PENDING})
    writes = lifecycle.finish("a", outcome, NOW, "w1")(Snapshot(pending, {"a": held}))
    assert writes is not None and writes.task is not None
    (ended,) = writes.runs
    assert ended.message == "Platform 1/2 (a): Searching: Found 1 result"
    assert (ended.provider, ended.calls, ended.cache) == ("p-1", [call], note)
    assert ended.timings == {"queued": 0.5, "searching": 1.5}
    assert (ended.options, ended.failed_queries) == ({"time_range": use}, [failure])
    assert writes.task.status is TaskStatus.RUNNING and writes.task.updated_at == NOW
    assert writes.task.progress.percent == 50.0
    failed = lifecycle.Outcome(
        state=PlatformState.FAILED,
        error="HTTP 500",
        failure=FailureKind.ERROR,
        retry_at=NOW + timedelta(seconds=9),
    )
    writes = lifecycle.finish("a", failed, NOW, "w1")(Snapshot(task, {"a": held}))
    assert writes is not None
    (ended,) = writes.runs
    assert (ended.message, ended.error) == ("Platform 1/2 (a): Failed: HTTP 500", "HTTP 500")
    assert (ended.failure, ended.retry_at) == (FailureKind.ERROR, NOW + timedelta(seconds=9))
    told = lifecycle.Outcome(state=PlatformState.SUCCEEDED, message="Served from the cache")
    writes = lifecycle.finish("a", told, NOW, "w1")(Snapshot(task, {"a": held}))
    assert (
        writes is not None and writes.runs[0].message == "Platform 1/2 (a): Served from the cache"
    )


def test_queued_progress_and_counted_words() -> None:
    """Kills `queued` and `counted`."""
    assert progress.queued(1) == Progress(percent=0.0, stage="queued", message="Queued: 1 platform")
    assert progress.queued(2).message == "Queued: 2 platforms"
    assert [progress.counted(n, "result") for n in (0, 1, 2)] == [
        "0 results",
        "1 result",
        "2 results",
    ]
    assert progress.counted(2, "query", "queries") == "2 queries"


def test_too_late_to_start_leaves_exactly_the_fraction_asked() -> None:
    """Kills `too_late_to_start`'s `<` -> `<=`."""
    task = _searching(["a"])  # created at NOW, deadline 30 s later
    assert not lifecycle.too_late_to_start(task, NOW + timedelta(seconds=15), 0.5)
    assert lifecycle.too_late_to_start(task, NOW + timedelta(seconds=16), 0.5)
