"""Rank and score fusion over document ids: pure functions, no I/O, no platform knowledge.

Each fuser takes one ranked run per platform (ids best first, with the platform's raw score or
None when the platform gives none, as web search APIs do) and returns `(id, fused score)` best
first. Ties are broken the same way everywhere, so a fused list never depends on dict or set
order: higher score, then the better (smaller) best rank, then the platform that came first in
`runs`, then the id.

`fusion.py` applies these to deduplicated results (ids are canonical URLs there); `evaluation.py`
applies them to document ids. The quota-based `concat` lives in `fusion.py`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from fanfuse.wire.models import FusionMethod

Run = Sequence[tuple[str, float | None]]
Fused = list[tuple[str, float]]
Normalization = Literal["minmax", "zscore"]

RRF_K = 60


class Fuser(Protocol):
    def __call__(
        self, runs: Mapping[str, Run], *, weights: Mapping[str, float] | None = None
    ) -> Fused: ...


@dataclass
class _Entry:
    score: float = 0.0
    best_rank: int = 0
    platform_order: int = 0


def _check_weights(
    runs: Mapping[str, Run], weights: Mapping[str, float] | None
) -> dict[str, float]:
    """Per-platform weight, 1.0 unless given; negative or non-finite weights are errors."""
    out: dict[str, float] = {}
    for name in runs:
        weight = 1.0 if weights is None else float(weights.get(name, 1.0))
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"weight for {name!r} must be a finite number >= 0, got {weight}")
        out[name] = weight
    return out


def _unique(run: Run) -> list[tuple[str, float | None]]:
    """The run with repeated ids dropped (the first, best-ranked occurrence counts)."""
    seen: set[str] = set()
    out: list[tuple[str, float | None]] = []
    for doc_id, score in run:
        if doc_id not in seen:
            seen.add(doc_id)
            out.append((doc_id, score))
    return out


def _combine(runs: Mapping[str, Run], contribution: Callable[[str, int, str], float]) -> Fused:
    """Sum `contribution(platform, rank, id)` per id over runs, then order with the tie-breaks."""
    entries: dict[str, _Entry] = {}
    for order, (name, run) in enumerate(runs.items()):
        unique = _unique(run)
        for rank, (doc_id, _) in enumerate(unique, start=1):
            entry = entries.get(doc_id)
            if entry is None:
                entry = entries[doc_id] = _Entry(best_rank=rank, platform_order=order)
            elif rank < entry.best_rank:
                entry.best_rank, entry.platform_order = rank, order
            entry.score += contribution(name, rank, doc_id)
    ordered = sorted(
        entries.items(),
        key=lambda item: (-item[1].score, item[1].best_rank, item[1].platform_order, item[0]),
    )
    return [(doc_id, entry.score) for doc_id, entry in ordered]


def rrf(
    runs: Mapping[str, Run], k: float = RRF_K, weights: Mapping[str, float] | None = None
) -> Fused:
    """Reciprocal rank fusion: score(d) = sum over platforms p of w_p / (k + rank_p(d)).

    Uses ranks only, so platforms whose scores are incomparable (or absent) mix safely;
    k = 60 is the value of Cormack, Clarke and Buettcher (SIGIR 2009), not tuned here.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    w = _check_weights(runs, weights)
    return _combine(runs, lambda name, rank, _id: w[name] / (k + rank))


def normalized_scores(run: Run, how: Normalization = "minmax") -> list[tuple[str, float]]:
    """A run's scores mapped to a common scale.

    A run with any missing or non-finite score is scored by rank instead (Borda: n - rank + 1),
    so a platform that reports no scores still contributes its order. "minmax" maps the run's
    best to 1 and its worst to 0 (all equal -> all 1); "zscore" subtracts the run's mean and
    divides by its standard deviation (all equal -> all 0).
    """
    unique = _unique(run)
    if not unique:
        return []
    raw = [s for _, s in unique]
    if any(s is None or not math.isfinite(s) for s in raw):
        values = [float(len(unique) - i) for i in range(len(unique))]
    else:
        values = [float(s) for s in raw if s is not None]
    if how == "minmax":
        low, high = min(values), max(values)
        span = high - low
        scaled = [(v - low) / span if span > 0 else 1.0 for v in values]
    elif how == "zscore":
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        scaled = [(v - mean) / std if std > 0 else 0.0 for v in values]
    else:
        raise ValueError(f"unknown normalization {how!r}")
    return [(doc_id, value) for (doc_id, _), value in zip(unique, scaled, strict=True)]


def score_fusion(
    runs: Mapping[str, Run],
    weights: Mapping[str, float] | None = None,
    how: Normalization = "minmax",
) -> Fused:
    """CombSUM of normalized scores: score(d) = sum over platforms p of w_p * norm_p(d).

    A document that a run did not return ranked below everything it did return, so it gets
    that run's floor: the lower of 0 and the run's lowest normalized score. Each run is
    shifted so that its floor is 0 (a no-op for min-max; for z-scores it moves every fused
    score by the same constant), so absence simply adds nothing and ties break as everywhere.
    """
    w = _check_weights(runs, weights)
    shifted: dict[str, dict[str, float]] = {}
    for name, run in runs.items():
        values = dict(normalized_scores(run, how))
        floor = min(0.0, min(values.values(), default=0.0))
        shifted[name] = {doc_id: value - floor for doc_id, value in values.items()}
    return _combine(runs, lambda name, _rank, doc_id: w[name] * shifted[name][doc_id])


def comb_mnz(
    runs: Mapping[str, Run],
    weights: Mapping[str, float] | None = None,
    how: Normalization = "minmax",
) -> Fused:
    """CombMNZ (Fox and Shaw, TREC-2 1994): CombSUM times the number of runs that returned d.

    Rewards agreement between platforms more than CombSUM does; same floors as `score_fusion`.
    """
    combsum = dict(score_fusion(runs, weights=weights, how=how))
    # Each run that returned d adds d's CombSUM once: n runs add n x CombSUM.
    return _combine(runs, lambda _name, _rank, doc_id: combsum[doc_id])


def rrf_score_weighted(
    runs: Mapping[str, Run], k: float = RRF_K, weights: Mapping[str, float] | None = None
) -> Fused:
    """RRF whose every contribution is scaled by the platform's min-max score of d.

    score(d) = sum over p of w_p * norm_p(d) / (k + rank_p(d)): the rank says where d stands,
    the score how far it is from the run's best. Not from the literature: a probe of whether
    raw scores add anything to ranks here (they did not, see `fanfuse eval`).
    """
    w = _check_weights(runs, weights)
    norms = {name: dict(normalized_scores(run)) for name, run in runs.items()}
    return _combine(runs, lambda name, rank, doc_id: w[name] * norms[name][doc_id] / (k + rank))


def _rrf(runs: Mapping[str, Run], *, weights: Mapping[str, float] | None = None) -> Fused:
    return rrf(runs, weights=weights)


def _score_minmax(runs: Mapping[str, Run], *, weights: Mapping[str, float] | None = None) -> Fused:
    return score_fusion(runs, weights=weights, how="minmax")


def _score_zscore(runs: Mapping[str, Run], *, weights: Mapping[str, float] | None = None) -> Fused:
    return score_fusion(runs, weights=weights, how="zscore")


def _score_ranks_only(
    runs: Mapping[str, Run], *, weights: Mapping[str, float] | None = None
) -> Fused:
    blind = {name: [(doc_id, None) for doc_id, _ in run] for name, run in runs.items()}
    return score_fusion(blind, weights=weights, how="minmax")


FUSERS: dict[FusionMethod, Fuser] = {
    FusionMethod.RRF: _rrf,
    FusionMethod.SCORE: _score_minmax,
}
"""The fusers a request can name (every FusionMethod but the quota-based concat)."""


def _comb_mnz(runs: Mapping[str, Run], *, weights: Mapping[str, float] | None = None) -> Fused:
    return comb_mnz(runs, weights=weights)


def _rrf_score_weighted(
    runs: Mapping[str, Run], *, weights: Mapping[str, float] | None = None
) -> Fused:
    return rrf_score_weighted(runs, weights=weights)


VARIANTS: dict[str, Fuser] = {
    "score_zscore": _score_zscore,
    "score_ranks_only": _score_ranks_only,
    "comb_mnz": _comb_mnz,
    "rrf_score_weighted": _rrf_score_weighted,
}
"""Fixed alternatives that evaluation reports next to FUSERS; not selectable by requests.

`score_zscore` is CombSUM of z-scores; `score_ranks_only` is the `score` fuser with every
platform's scores withheld, i.e. what it does for platforms that give none (Google and co.).
`comb_mnz` and `rrf_score_weighted` are the score-aware fusers tried for `comprehensive`.
"""

DEFAULT_FUSION: FusionMethod = FusionMethod.RRF
"""Chosen with `fanfuse eval` on Vaswani: RRF (k = 60) clearly beats both single platforms and
is level, within noise, with min-max score fusion, while needing only ranks (web platforms give
no comparable scores) and no knob tuned on the 93 queries.
"""
