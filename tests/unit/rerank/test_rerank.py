"""The offline rerankers as pure functions: RM3 and pool BM25 by hand, order, ties, edge cases."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from fanfuse.fusion.rerank_contract import FusedOrder, Reranked, Reranker, reordered
from fanfuse.rerank.offline import (
    DEFAULT_OFFLINE,
    VARIANTS,
    PoolRm3,
    candidate_text,
    combined,
    pool_bm25,
    relevance_model,
    rm3_query,
)
from fanfuse.wire.models import Result

WHEN = datetime(2024, 1, 1, tzinfo=UTC)


def result(
    rank: int,
    snippet: str = "",
    title: str = "",
    content: str | None = None,
    ranks: dict[str, int] | None = None,
) -> Result:
    return Result(
        rank=rank,
        score=1 / (60 + rank),
        platform="docs",
        platforms=["docs"],
        ranks=ranks or {"docs": rank},
        title=title,
        url=f"https://example.org/{rank}",
        snippet=snippet,
        content=content,
        retrieved_at=WHEN,
        metadata={"doc_id": str(rank)},
    )


# Fused order: a page about cats first, then dogs, then two about cats and mice.
POOL = [
    result(1, "cats purr and cats hunt mice"),
    result(2, "dogs bark at the postman"),
    result(3, "a cat chases mice in the barn"),
    result(4, "mice eat grain"),
]


def order(reranked: Reranked) -> list[int]:
    return [r.metadata["fused_rank"] for r in reranked.results]


def test_relevance_model_by_hand() -> None:
    # Weights 1:1 -> 1/2 each. a: 1/2 * 1/3; c: 1/2 * 2/3; d: 1/2 * 1. Top 2: d, c -> 0.6, 0.4.
    model = relevance_model([["a", "c", "c"], ["d"]], [1.0, 1.0], terms=2)
    assert model == pytest.approx({"d": 0.6, "c": 0.4})
    # All weights zero: uniform; ties go to the alphabetically first term.
    assert list(relevance_model([["y", "x"]], [0.0], terms=1)) == ["x"]


def test_rm3_mixes_the_query_with_the_relevance_model() -> None:
    expanded = rm3_query(["a", "b"], [["a", "c", "c"], ["d"]], [1.0, 1.0], 2, 0.5)
    assert expanded == pytest.approx({"a": 0.25, "b": 0.25, "c": 0.2, "d": 0.3})
    assert rm3_query(["a", "a", "b"], [], []) == pytest.approx({"a": 2 / 3, "b": 1 / 3})
    assert rm3_query([], [["d"]], [1.0]) == {"d": 1.0}
    assert rm3_query([], [], []) == {}


def test_pool_bm25_by_hand() -> None:
    # k1 = 1.5, b = 0.75 (the docs index's); mean length 2; "x" in 1 of 2 documents.
    docs = [["x", "y"], ["y", "y"]]
    idf = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    assert pool_bm25({"x": 2.0}, docs) == pytest.approx([2.0 * idf * 2.5 / (1 + 1.5), 0.0])
    assert pool_bm25({"x": 1.0}, []) == []
    assert pool_bm25({"zzz": 1.0}, docs) == [0.0, 0.0]


def test_combined_rrf_fuses_the_fused_order_with_the_prf_order() -> None:
    # PRF order: candidate 1 (0.9), then 0 (0.5); candidate 2 scored 0 is not in the PRF run.
    scores = combined(POOL[:3], [0.5, 0.9, 0.0], "rrf")
    assert scores == pytest.approx([1 / 61 + 1 / 62, 1 / 62 + 1 / 61, 1 / 63])
    assert combined(POOL[:3], [0.5, 0.9, 0.0], "replace") == [0.5, 0.9, 0.0]


def test_pool_rm3_puts_the_pages_on_the_topic_first() -> None:
    reranked = PoolRm3().rerank("cat mice", POOL, limit=10)
    assert reranked.method == "pool_rm3"
    # The cat page at fused rank 3 passes the dog page; the dog page's own words, in the
    # feedback of so small a pool, keep it above the page about mice alone.
    assert order(reranked) == [1, 3, 2, 4]
    assert [r.rank for r in reranked.results] == [1, 2, 3, 4]
    assert reranked.results[0].metadata["fused_score"] == POOL[0].score
    assert "RM3 over 4 candidates" in reranked.note and "rrf" in reranked.note


def test_every_variant_is_deterministic_and_leaves_its_input_alone() -> None:
    before = [c.model_copy(deep=True) for c in POOL]
    for name, reranker in VARIANTS.items():
        first = reranker.rerank("cat mice", POOL, limit=3)
        assert first == reranker.rerank("cat mice", POOL, limit=3), name
        assert len(first.results) == 3 and first.method == name
    assert before == POOL


def test_ties_keep_the_fused_order() -> None:
    same = [result(1, "mice"), result(2, "mice"), result(3, "mice")]
    for reranker in VARIANTS.values():
        assert order(reranker.rerank("mice", same, limit=3)) == [1, 2, 3]
    assert [r.metadata["fused_rank"] for r in reordered(same, [1.0, 2.0, 2.0], 3)] == [2, 3, 1]


def test_empty_single_and_limits() -> None:
    reranker = PoolRm3()
    empty = reranker.rerank("cats", [], limit=10)
    assert empty.results == [] and empty.method == "pool_rm3"
    single = reranker.rerank("cats", POOL[:1], limit=10)
    assert [r.url for r in single.results] == [POOL[0].url] and single.results[0].rank == 1
    assert reranker.rerank("cats", POOL, limit=0).results == []
    with pytest.raises(ValueError, match="limit"):
        reranker.rerank("cats", POOL, limit=-1)


def test_candidates_without_text_keep_the_fused_order() -> None:
    bare = [result(1), result(2), result(3)]
    reranked = PoolRm3().rerank("cats", bare, limit=2)
    assert [r.url for r in reranked.results] == [bare[0].url, bare[1].url]
    assert "fused order kept" in reranked.note
    # A query with no indexable word (only stopwords) does the same.
    assert PoolRm3().rerank("the of and", POOL, limit=4).results == POOL


def test_a_candidate_without_text_among_others_is_ranked_by_its_fused_rank_only() -> None:
    pool = [result(1), *POOL[1:]]
    reranked = PoolRm3().rerank("cat mice", pool, limit=4)
    assert set(order(reranked)) == {1, 2, 3, 4}
    assert order(reranked)[0] == 3  # fused rank 3 and PRF rank 1 beat fused rank 1 alone


def test_candidate_text_prefers_content_and_skips_a_title_the_text_starts_with() -> None:
    assert candidate_text(result(1, "short", title="Cats", content="long text")) == (
        "Cats\nlong text"
    )
    assert candidate_text(result(1, "Cats purr loudly", title="Cats purr…")) == "Cats purr loudly"


def test_the_vote_combination_uses_each_platforms_ranks() -> None:
    pool = [
        result(1, "dogs", ranks={"docs": 1}),
        result(2, "cats", ranks={"docs": 2, "vectors": 1}),
    ]
    # docs: 1/61, 1/62; vectors: -, 1/61; prf: -, 1/61.
    assert combined(pool, [0.0, 1.0], "vote") == pytest.approx([1 / 61, 1 / 62 + 2 / 61])


def test_fused_order_and_the_default() -> None:
    kept = FusedOrder().rerank("anything", POOL, limit=2)
    assert kept.results == POOL[:2] and kept.method == "fused"
    with pytest.raises(ValueError, match="limit"):
        FusedOrder().rerank("anything", POOL, limit=-1)
    with pytest.raises(ValueError, match="2 scores for 4"):
        reordered(POOL, [1.0, 2.0], 4)
    # No offline reranker beat RRF on Vaswani, so comprehensive keeps the fused order.
    default: Reranker = DEFAULT_OFFLINE
    assert isinstance(default, FusedOrder)
