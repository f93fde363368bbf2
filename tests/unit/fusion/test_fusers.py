"""Fusers against hand-computed values: RRF, weights, tie-breaks, score fusion without scores."""

from __future__ import annotations

import math

import pytest

from fanfuse.fusion.fusers import (
    DEFAULT_FUSION,
    FUSERS,
    VARIANTS,
    Run,
    comb_mnz,
    normalized_scores,
    rrf,
    rrf_score_weighted,
    score_fusion,
)
from fanfuse.wire.models import FusionMethod

RUNS = {
    "docs": [("a", 9.0), ("b", 7.0), ("c", 1.0)],
    "vectors": [("b", 0.9), ("d", 0.8), ("a", 0.5)],
}


def approx(fused: list[tuple[str, float]]) -> list[tuple[str, object]]:
    return [(doc_id, pytest.approx(score)) for doc_id, score in fused]


def test_rrf_hand_computed() -> None:
    # a: 1/61 + 1/63; b: 1/62 + 1/61; c: 1/63; d: 1/62
    assert rrf(RUNS) == approx(
        [("b", 1 / 62 + 1 / 61), ("a", 1 / 61 + 1 / 63), ("d", 1 / 62), ("c", 1 / 63)]
    )
    assert rrf(RUNS, k=0) == approx([("b", 1.5), ("a", 1 + 1 / 3), ("d", 0.5), ("c", 1 / 3)])


def test_rrf_weights() -> None:
    fused = rrf(RUNS, weights={"docs": 3.0, "vectors": 1.0})
    assert fused == approx(
        [("a", 3 / 61 + 1 / 63), ("b", 3 / 62 + 1 / 61), ("c", 3 / 63), ("d", 1 / 62)]
    )
    assert rrf(RUNS, weights={"docs": 3.0}) == fused  # unnamed platforms weigh 1
    zero = rrf(RUNS, weights={"vectors": 0})
    assert [d for d, _ in zero] == ["a", "b", "c", "d"] and zero[-1][1] == 0.0
    with pytest.raises(ValueError, match="weight for 'docs'"):
        rrf(RUNS, weights={"docs": -1})
    with pytest.raises(ValueError, match="weight for 'docs'"):
        rrf(RUNS, weights={"docs": math.nan})
    with pytest.raises(ValueError, match="k must be"):
        rrf(RUNS, k=-1)


def test_ties_are_deterministic() -> None:
    # x and y tie on score and best rank: the platform listed first wins, whatever the ids.
    assert [d for d, _ in rrf({"p": [("y", None)], "q": [("x", None)]})] == ["y", "x"]
    assert [d for d, _ in rrf({"q": [("x", None)], "p": [("y", None)]})] == ["x", "y"]
    # Same score, different best rank: the better rank wins.
    fused = rrf({"p": [("m", None), ("n", None)], "q": [("o", None), ("m", None)]}, k=1)
    # m: 1/2 + 1/3; n: 1/3; o: 1/2 -> m, o, n
    assert [d for d, _ in fused] == ["m", "o", "n"]
    # Fully tied within one platform (impossible by rank) falls back to id, shown via score 0.
    zero = rrf({"p": [("z", None), ("a", None)]}, weights={"p": 0})
    assert [d for d, _ in zero] == ["z", "a"]  # rank order kept before ids


def test_duplicates_in_a_run_count_once_at_their_best_rank() -> None:
    assert rrf({"p": [("a", None), ("a", None), ("b", None)]}, k=0) == approx(
        [("a", 1.0), ("b", 0.5)]
    )


def test_empty_inputs() -> None:
    assert rrf({}) == []
    assert rrf({"p": []}) == []
    assert score_fusion({"p": [], "q": [("a", 1.0)]}) == [("a", 1.0)]


def test_normalized_scores() -> None:
    assert normalized_scores([("a", 9.0), ("b", 7.0), ("c", 1.0)]) == approx(
        [("a", 1.0), ("b", 0.75), ("c", 0.0)]
    )
    # No scores (a web API): Borda n - rank + 1 = 3, 2, 1 -> min-max 1, 0.5, 0.
    assert normalized_scores([("a", None), ("b", None), ("c", None)]) == approx(
        [("a", 1.0), ("b", 0.5), ("c", 0.0)]
    )
    # One missing score makes the whole run rank-based.
    assert normalized_scores([("a", 5.0), ("b", None)]) == [("a", 1.0), ("b", 0.0)]
    assert normalized_scores([("a", 2.0), ("b", 2.0)]) == [("a", 1.0), ("b", 1.0)]
    z = dict(normalized_scores([("a", 3.0), ("b", 1.0)], "zscore"))
    assert z == {"a": pytest.approx(1.0), "b": pytest.approx(-1.0)}
    assert normalized_scores([("a", 2.0)], "zscore") == [("a", 0.0)]


def test_score_fusion_minmax_hand_computed() -> None:
    # docs: a 1, b 0.75, c 0; vectors: b 1, d 0.75, a 0.
    assert score_fusion(RUNS) == approx([("b", 1.75), ("a", 1.0), ("d", 0.75), ("c", 0.0)])
    weighted = score_fusion(RUNS, weights={"vectors": 2.0})
    assert weighted == approx([("b", 2.75), ("d", 1.5), ("a", 1.0), ("c", 0.0)])


def test_score_fusion_with_a_scoreless_platform() -> None:
    runs: dict[str, Run] = {
        "docs": [("a", 10.0), ("b", 5.0), ("c", 0.0)],
        "google": [("c", None), ("d", None), ("a", None)],
    }
    # docs: a 1, b 0.5, c 0; google (Borda): c 1, d 0.5, a 0.
    assert score_fusion(runs) == approx([("a", 1.0), ("c", 1.0), ("b", 0.5), ("d", 0.5)])


def test_score_fusion_zscore_gives_absent_documents_the_run_floor() -> None:
    runs = {"p": [("a", 3.0), ("b", 1.0)], "q": [("c", 2.0), ("a", 0.0)]}
    # p: a +1, b -1 (floor -1); q: c +1, a -1 (floor -1). Shifted by the floor:
    # a: 2 + 0 = 2; b: 0 (+ q's floor 0); c: 2 (+ p's floor 0).
    fused = score_fusion(runs, how="zscore")
    assert fused == approx([("a", 2.0), ("c", 2.0), ("b", 0.0)])
    with pytest.raises(ValueError, match="unknown normalization"):
        normalized_scores([("a", 1.0)], "bogus")  # type: ignore[arg-type]  # invalid on purpose


def test_registry() -> None:
    assert set(FUSERS) == set(FusionMethod) - {FusionMethod.CONCAT}
    assert DEFAULT_FUSION in FUSERS
    for fuser in [*FUSERS.values(), *VARIANTS.values()]:
        fused = fuser(RUNS, weights={"docs": 1.0})
        assert sorted(d for d, _ in fused) == ["a", "b", "c", "d"]
        scores = [s for _, s in fused]
        assert scores == sorted(scores, reverse=True)
    assert FUSERS[FusionMethod.RRF](RUNS) == rrf(RUNS)
    assert VARIANTS["score_ranks_only"](RUNS) == score_fusion(
        {name: [(d, None) for d, _ in run] for name, run in RUNS.items()}
    )


def test_comb_mnz_multiplies_combsum_by_the_runs_that_found_it() -> None:
    # min-max: docs a 1, b 0.75, c 0; vectors b 1, d 0.75, a 0.
    # CombSUM a 1, b 1.75, c 0, d 0.75; found by a 2, b 2, c 1, d 1.
    assert comb_mnz(RUNS) == approx([("b", 3.5), ("a", 2.0), ("d", 0.75), ("c", 0.0)])
    assert comb_mnz({}) == []


def test_rrf_score_weighted_scales_each_contribution_by_the_normalized_score() -> None:
    # a: 1/61 + 0/63; b: 0.75/62 + 1/61; c: 0/63; d: 0.75/62
    fused = rrf_score_weighted(RUNS)
    assert fused == approx([("b", 0.75 / 62 + 1 / 61), ("a", 1 / 61), ("d", 0.75 / 62), ("c", 0.0)])
