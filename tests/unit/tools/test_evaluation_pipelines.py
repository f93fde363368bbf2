"""Pipelines (depth, fuser, reranker) on fixture hits, and the paired randomization test."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from fanfuse.fusion.fusers import rrf
from fanfuse.fusion.rerank_contract import FusedOrder, Reranked, reordered
from fanfuse.tools.evaluation.pipelines import (
    PERMUTATIONS,
    Candidates,
    Pipeline,
    compare,
    fuser_named,
    pipeline_run,
    pipelines,
)
from fanfuse.wire.models import Hit, Result


def hits(ids: str, text: str = "") -> list[Hit]:
    return [
        Hit(
            url=f"https://vaswani.local/doc/{doc_id}",
            snippet=f"{text} {doc_id}",
            rank=rank,
            score=10.0 - rank,
            metadata={"doc_id": doc_id},
        )
        for rank, doc_id in enumerate(ids, start=1)
    ]


CANDIDATES = Candidates(["q"], {"docs": [hits("abcd")], "vectors": [hits("cexa")]})


def ids(run: list[list[tuple[str, float]]]) -> list[str]:
    return [doc_id for doc_id, _ in run[0]]


def test_depth_cuts_each_platform_list_before_fusion() -> None:
    full = rrf({"docs": [(d, None) for d in "abcd"], "vectors": [(d, None) for d in "cexa"]})
    assert ids(pipeline_run(Pipeline("rrf", 4), CANDIDATES)) == [d for d, _ in full][:4]
    # Top 2 each: a b | c e -> a and c at rank 1, b and e at rank 2 (platform order breaks ties)
    assert ids(pipeline_run(Pipeline("rrf@2", 2), CANDIDATES)) == ["a", "c"]
    assert ids(pipeline_run(Pipeline("rrf@2", 2, reranker=FusedOrder()), CANDIDATES)) == [
        "a",
        "c",
    ]


class Reverse:
    """A reranker that turns the pool upside down: shows it sees the whole fused pool."""

    def rerank(self, query: str, candidates: Sequence[Result], limit: int) -> Reranked:
        scores = [float(i) for i in range(len(candidates))]
        return Reranked(reordered(candidates, scores, limit), "reverse")


def test_the_reranker_sees_every_fused_candidate_and_the_list_keeps_depth() -> None:
    # Depth 2: the pool is a, c, b, e (4 candidates); reversed and cut to 2: e, b.
    assert ids(pipeline_run(Pipeline("rev", 2, reranker=Reverse()), CANDIDATES)) == ["e", "b"]


def test_pools_are_made_once_and_content_needs_content_hits() -> None:
    candidates = Candidates(["q"], {"docs": [hits("ab")]})
    first = candidates.pools(2, "rrf")
    assert candidates.pools(2, "rrf") is first
    with pytest.raises(ValueError, match="content"):
        candidates.pools(2, "rrf", content=True)
    with pytest.raises(ValueError, match="unknown fuser 'nope'"):
        fuser_named("nope")


def test_compare_by_hand() -> None:
    same = compare([0.5, 0.2], [0.5, 0.2], "base", "nDCG@10")
    assert (same.delta, same.wins, same.losses, same.ties, same.p_value) == (0, 0, 0, 2, 1.0)
    # Four equal gains: only all-plus or all-minus sign flips are as extreme: p = 2/16.
    up = compare([1.0] * 4, [0.0] * 4, "base", "nDCG@10")
    assert (up.delta, up.wins, up.losses) == (1.0, 4, 0)
    assert up.p_value == pytest.approx(0.125, abs=0.02)
    assert compare([], [], "base", "nDCG@10").p_value == 1.0
    assert up.p_value >= 1 / (PERMUTATIONS + 1)


def test_pipeline_rows_stay_below_the_eval_depth() -> None:
    assert {p.depth for p, _ in pipelines(100)} == {10, 30, 50, 100}
    assert {p.depth for p, _ in pipelines(20)} == {10, 20}
    assert {p.depth for p, _ in pipelines(5)} == {5}
    assert len({p.name for p, _ in pipelines(100)}) == len(pipelines(100))
