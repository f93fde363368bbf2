"""Modes, platform health and the rerank plumbing: the pure parts, one rule per test."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from fanfuse.fusion.rerank_contract import RerankOrder, apply_order
from fanfuse.rerank.llm import parse_ranking
from fanfuse.rules import aggregate, health
from fanfuse.wire.models import (
    Hit,
    PlatformHealth,
    PlatformRun,
    PlatformState,
    RerankNote,
    SearchRequest,
    Task,
    utcnow,
)
from fanfuse.wire.modes import MODES, Mode
from tests.support.fakes import hits

AVAILABLE = ["docs", "vectors", "google", "perplexity"]
LATENCY = {"docs": 0.05, "vectors": 0.3, "google": 1.0, "perplexity": 8.0}


def by_latency(names: list[str]) -> list[str]:
    return sorted(names, key=LATENCY.__getitem__)


def parse(**fields: Any) -> SearchRequest:
    context = {"available": AVAILABLE, "by_latency": by_latency}
    return SearchRequest.model_validate(fields, context=context)


def test_all_means_the_two_quickest_in_fast_mode_and_every_platform_otherwise() -> None:
    # Listed in the available order, not the latency order.
    LATENCY["google"] = 0.01
    try:
        assert parse(query="q", mode="fast").platforms == ["docs", "google"]
    finally:
        LATENCY["google"] = 1.0
    assert parse(query="q", mode="fast").platforms == ["docs", "vectors"]
    assert parse(query="q").platforms == AVAILABLE
    assert parse(query="q", mode="comprehensive").platforms == AVAILABLE


def test_a_named_platform_list_wins_over_the_mode() -> None:
    assert parse(query="q", mode="fast", platform="perplexity").platforms == ["perplexity"]


@pytest.mark.parametrize(
    ("mode", "given", "expected"),
    [
        ("fast", None, False),
        ("balanced", None, False),
        ("comprehensive", None, True),
        ("comprehensive", False, False),
        ("fast", True, True),
    ],
)
def test_content_is_the_modes_unless_the_request_says(
    mode: str, given: bool | None, expected: bool
) -> None:
    fields: dict[str, Any] = {"query": "q", "mode": mode}
    if given is not None:
        fields["include_content"] = given
    request = parse(**fields)
    assert request.include_content is expected
    # Stored and read back (no context, fields all set), the choice holds.
    assert SearchRequest.model_validate(request.model_dump()).include_content is expected


@pytest.mark.parametrize(
    ("mode", "max_results", "depth", "reranks"),
    [
        ("fast", 10, 10, False),
        ("balanced", 10, 10, False),
        ("comprehensive", 5, 50, True),
        ("comprehensive", 20, 60, True),
        ("comprehensive", 50, 100, True),
    ],
)
def test_depth_and_rerank_per_mode(mode: str, max_results: int, depth: int, reranks: bool) -> None:
    request = parse(query="q", mode=mode, max_results=max_results)
    assert (request.depth, request.reranks) == (depth, reranks)


def test_the_default_mode_is_balanced_and_a_bad_mode_names_the_field() -> None:
    assert parse(query="q").mode is Mode.BALANCED
    with pytest.raises(ValidationError) as info:
        parse(query="q", mode="turbo")
    assert info.value.errors()[0]["loc"] == ("mode",)
    assert set(MODES) == set(Mode)


def test_latency_is_averaged_and_written_at_most_every_half_minute() -> None:
    now = utcnow()
    first = health.observed(None, "docs", 1.0, now)
    assert first == PlatformHealth(
        name="docs", latency_s=1.0, samples=1, recent_s=[1.0], updated_at=now
    )
    assert health.observed(first, "docs", 5.0, now + timedelta(seconds=29)) is None
    later = now + timedelta(seconds=health.MIN_WRITE_INTERVAL_S)
    second = health.observed(first, "docs", 5.0, later)
    assert second is not None and second.samples == 2
    assert second.latency_s == pytest.approx(health.ALPHA * 5.0 + (1 - health.ALPHA) * 1.0)
    assert second.recent_s == [1.0, 5.0]  # the samples a chain's default hedge reads (p90)


def test_measured_latency_beats_the_prior_and_ties_keep_their_order() -> None:
    now = utcnow()
    measured = {"slow": PlatformHealth(name="slow", latency_s=0.01, samples=3, updated_at=now)}
    priors = {"a": 1.0, "b": 1.0, "slow": 9.0}
    assert health.by_latency(["a", "b", "slow"], measured, priors) == ["slow", "a", "b"]
    assert health.by_latency(["x", "a"], {}, priors) == ["a", "x"]  # unknown: last


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('{"ranking": [3, 1, 2]}', [2, 0, 1]),
        ('```json\n{"ranking": [2]}\n```', [1, 0, 2]),  # left-out ids follow in fused order
        ("Sure! [3, 3, 9, 0, true, 1]", [2, 0, 1]),  # repeats, out of range, bools dropped
    ],
)
def test_a_ranking_is_read_leniently(answer: str, expected: list[int]) -> None:
    assert parse_ranking(answer, 3) == expected


@pytest.mark.parametrize("answer", ["I cannot rank these.", '{"ranking": [7, 8]}', "{oops}"])
def test_an_answer_that_ranks_nothing_is_an_error(answer: str) -> None:
    with pytest.raises(ValueError):
        parse_ranking(answer, 3)


def _task(mode: str, queries: list[str], max_results: int = 2) -> tuple[Task, list[PlatformRun]]:
    now = utcnow()
    request = SearchRequest.model_validate(
        {"query": queries, "platform": ["a", "b"], "mode": mode, "max_results": max_results}
    )
    task = Task(
        task_id="t",
        request=request,
        queries=request.queries,
        platforms=["a", "b"],
        fusion=request.fusion or "rrf",
        deadline_at=now + timedelta(seconds=30),
        expires_at=now + timedelta(minutes=5),
    )
    runs = []
    for i, name in enumerate(["a", "b"], 1):
        found: list[Hit] = []
        for qi in range(len(queries)):
            found += [h.model_copy(update={"query_index": qi}) for h in hits(f"q{qi}", 8)]
        ranked = [h.model_copy(update={"rank": r}) for r, h in enumerate(found, 1)]
        runs.append(
            PlatformRun(
                task_id="t", name=name, index=i, of=2, state=PlatformState.SUCCEEDED, results=ranked
            )
        )
    return task, runs


def test_a_reranking_mode_fuses_its_pool_then_applies_the_order_and_cuts() -> None:
    task, runs = _task("comprehensive", ["q"])
    pool = aggregate.candidates(task, runs)[0].results
    assert len(pool) == 8  # the whole pool (depth 30), not max_results
    order = [r.url for r in reversed(pool)]
    note = RerankNote(method="llm", applied=True, candidates=8)
    final = aggregate.final_document(task, runs, utcnow(), {0: RerankOrder(order, note)}).task
    assert [r.url for r in final.results] == order[:2]
    assert [r.rank for r in final.results] == [1, 2]
    assert final.rerank == note


def test_with_several_queries_each_list_is_reranked_and_the_combined_one_stays_fused() -> None:
    task, runs = _task("comprehensive", ["q0", "q1"])
    pools = aggregate.candidates(task, runs)
    plans = {
        qi: RerankOrder(
            [r.url for r in reversed(p.results)], RerankNote(method="llm", applied=True)
        )
        for qi, p in enumerate(pools)
    }
    final = aggregate.final_document(task, runs, utcnow(), plans).task
    for qi, pool in enumerate(pools):
        expected = [r.url for r in reversed(pool.results)][:2]
        assert [r.url for r in final.results_by_query[qi].results] == expected
    plain = aggregate.final_document(task, runs, utcnow(), None).task
    assert [r.url for r in final.results] == [r.url for r in plain.results]
    assert plain.rerank is not None and plain.rerank.method == "none"


def test_a_mode_that_does_not_rerank_has_no_note_and_asks_for_max_results() -> None:
    task, runs = _task("balanced", ["q"])
    final = aggregate.final_document(task, runs, utcnow()).task
    assert final.rerank is None and len(final.results) == 2


def test_apply_order_ignores_unknown_urls_and_keeps_the_rest_in_fused_order() -> None:
    task, runs = _task("balanced", ["q"], max_results=4)
    results = aggregate.final_document(task, runs, utcnow()).task.results
    urls = [r.url for r in results]
    reordered = apply_order(results, ["https://nowhere.test/", urls[2]], 3)
    assert [r.url for r in reordered] == [urls[2], urls[0], urls[1]]
    assert [r.rank for r in reordered] == [1, 2, 3]
    assert [r.score for r in reordered] == [results[2].score, results[0].score, results[1].score]
