"""What `fanfuse eval` scores beyond single fusers: pipelines, re-querying, significance.

A pipeline is what a search mode does to one query's platform lists: take each platform's
top `depth`, fuse them (production's `fusion.fuse_with`, dedup included), then rerank the
fused list (`rerank.Reranker`, or nothing). `pipeline_run` scores any (depth, fuser, reranker)
triple, so a row per search mode is one `Pipeline` each.

Re-querying (RM3 over the whole BM25 index, a second `docs` round) is not a pipeline: it needs
a second platform round, so `requery_hits` builds that round's lists for the eval only.

A row that claims to beat another is checked with a paired randomization test on the per-query
values (`compare`): 93 queries make differences of 0.01 in nDCG@10 common by chance alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel

from fanfuse.fusion import fuse as fusion
from fanfuse.fusion.fusers import DEFAULT_FUSION, FUSERS, VARIANTS, Fuser
from fanfuse.fusion.rerank_contract import Reranker
from fanfuse.platforms.contract import SearchParams
from fanfuse.platforms.docs import to_hits
from fanfuse.rerank.offline import DEFAULT_OFFLINE, FB_DOCS, FB_TERMS, ORIG_WEIGHT, rm3_query
from fanfuse.rerank.offline import VARIANTS as OFFLINE_VARIANTS
from fanfuse.retrieval import Ranked
from fanfuse.retrieval.bm25 import Bm25Index
from fanfuse.retrieval.corpus import Corpus, indexable_text
from fanfuse.wire.models import Hit, Result
from fanfuse.wire.modes import MODES

# Per query: (doc id, score) best first.
IdRun = list[list[tuple[str, float]]]
PlatformHits = Mapping[str, Sequence[Sequence[Hit]]]
Kind = Literal["platform", "fuser", "reranker", "requery", "mode"]

PERMUTATIONS = 10_000
SEED = 20_240_909  # fixed: the same report every run
SHALLOW_DEPTHS = (10, 30, 50)
"""Per-platform depths measured below the eval's own (100): what depth alone does."""
PRODUCTION_DEPTH = 10
"""Each platform's list length at the default `max_results`: the `balanced` baseline's depth."""


def fuser_named(name: str) -> Fuser:
    """A fuser by the name `fanfuse eval` reports it under (a FusionMethod value or a variant)."""
    named: dict[str, Fuser] = {m.value: f for m, f in FUSERS.items()} | dict(VARIANTS)
    try:
        return named[name]
    except KeyError:
        raise ValueError(f"unknown fuser {name!r}; known: {', '.join(named)}") from None


@dataclass(frozen=True)
class Pipeline:
    """One way from platform lists to a result list: depth, fuser, optional reranker.

    The reranker sees every fused candidate (up to `depth` per platform) and the list keeps its
    best `depth`, as the fuser rows do: at depth 100, AP@100 and R@100 compare with them; at
    depth 10 the list is what a `max_results=10` search shows. `content` gives the hits their
    full text, as a search with `include_content` would (the snippet is 300 characters).
    """

    name: str
    depth: int
    fuser: str = DEFAULT_FUSION.value
    reranker: Reranker | None = None
    content: bool = False


def mode_pipelines(max_results: int = PRODUCTION_DEPTH) -> list[Pipeline]:
    """A row per search mode, as it runs with no LLM endpoint: the mode's depth for
    `max_results`, the default fuser, the offline default reranker where the mode reranks.
    `fast`'s two quickest platforms are both offline platforms here, so the rows differ in
    depth and reranking only."""
    return [
        Pipeline(
            f"mode:{mode.value}",
            spec.depth(max_results),
            reranker=DEFAULT_OFFLINE if spec.rerank else None,
            content=bool(spec.content),
        )
        for mode, spec in MODES.items()
    ]


@dataclass
class Candidates:
    """Every query's platform hits at the eval's depth, and the fused pools made from them.

    A pool (one fused list per query) is made once per (depth, fuser, content) and shared by
    every reranker row: fusion with dedup is the slow part of a row.
    """

    queries: list[str]
    hits: PlatformHits
    content_hits: PlatformHits = field(default_factory=dict)
    _pools: dict[tuple[int, str, bool], list[list[Result]]] = field(default_factory=dict)

    def pools(self, depth: int, fuser: str, content: bool = False) -> list[list[Result]]:
        key = (depth, fuser, content)
        if key not in self._pools:
            if content and not self.content_hits:
                raise ValueError("no hits with content to fuse")
            hits = self.content_hits if content else self.hits
            fuse = fuser_named(fuser)
            self._pools[key] = [
                fusion.fuse_with(
                    {name: list(lists[i][:depth]) for name, lists in hits.items()},
                    fuse,
                    depth * max(1, len(hits)),
                )
                for i in range(len(self.queries))
            ]
        return self._pools[key]


def pipeline_run(pipeline: Pipeline, candidates: Candidates) -> IdRun:
    """Each query's hits cut to the pipeline's depth, fused, reranked, as (doc id, score)."""
    pools = candidates.pools(pipeline.depth, pipeline.fuser, pipeline.content)
    out: IdRun = []
    for query, pool in zip(candidates.queries, pools, strict=True):
        if pipeline.reranker is None:
            results = pool[: pipeline.depth]
        else:
            results = pipeline.reranker.rerank(query, pool, pipeline.depth).results
        out.append([(str(r.metadata["doc_id"]), r.score) for r in results])
    return out


def pipelines(depth: int) -> list[tuple[Pipeline, Kind]]:
    """The rows `fanfuse eval` adds after the fusers (which are at `depth`), with their kind.

    Depth alone (RRF at each shallower depth), every fuser at the production depth, every
    offline reranker over the RRF pool at the production depth and at `depth`, and at `depth`
    again with the documents' full text.
    """
    shallow = [d for d in SHALLOW_DEPTHS if d < depth]
    rows: list[tuple[Pipeline, Kind]] = [
        (Pipeline(f"{DEFAULT_FUSION.value}@{d}", d), "fuser") for d in shallow
    ]
    if depth > PRODUCTION_DEPTH:
        names = [m.value for m in FUSERS if m is not DEFAULT_FUSION] + list(VARIANTS)
        rows += [
            (Pipeline(f"{name}@{PRODUCTION_DEPTH}", PRODUCTION_DEPTH, name), "fuser")
            for name in names
        ]
    rerank_depths = sorted({min(PRODUCTION_DEPTH, depth), depth})
    for d, content in [*((d, False) for d in rerank_depths), (depth, True)]:
        suffix = "+content" if content else ""
        rows += [
            (Pipeline(f"{name}@{d}{suffix}", d, reranker=reranker, content=content), "reranker")
            for name, reranker in OFFLINE_VARIANTS.items()
        ]
    return rows


class Comparison(BaseModel):
    """A run against a baseline on one measure, query by query."""

    baseline: str
    measure: str
    delta: float
    wins: int
    losses: int
    ties: int
    p_value: float


def compare(
    values: Sequence[float], baseline: Sequence[float], baseline_name: str, measure: str
) -> Comparison:
    """Mean difference, per-query wins/losses, and a two-sided paired randomization test.

    The test flips the sign of each query's difference at random (`PERMUTATIONS` times, fixed
    seed) and counts how often the mean difference is at least as large as observed; p is that
    share, with the observed one counted (so never 0).
    """
    diffs = np.asarray(values, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    eps = 1e-12
    observed = float(diffs.mean()) if diffs.size else 0.0
    if diffs.size:
        signs = np.random.default_rng(SEED).choice((-1.0, 1.0), size=(PERMUTATIONS, diffs.size))
        extreme = int(np.sum(np.abs(signs @ diffs / diffs.size) >= abs(observed) - eps))
    else:
        extreme = PERMUTATIONS
    return Comparison(
        baseline=baseline_name,
        measure=measure,
        delta=observed,
        wins=int(np.sum(diffs > eps)),
        losses=int(np.sum(diffs < -eps)),
        ties=int(np.sum(np.abs(diffs) <= eps)),
        p_value=(extreme + 1) / (PERMUTATIONS + 1),
    )


def _expand(
    index: Bm25Index, query: str, feedback: Sequence[tuple[int, float]]
) -> dict[str, float]:
    """RM3 with the literature's defaults over whole corpus documents (positions, weights)."""
    docs = [index.analyze(indexable_text(index.corpus.docs[p])) for p, _ in feedback]
    weights = [max(w, 0.0) for _, w in feedback]
    return rm3_query(index.analyze(query), docs, weights, FB_TERMS, ORIG_WEIGHT)


def requery_ranked(
    index: Bm25Index,
    queries: Sequence[str],
    feedback: Sequence[Sequence[tuple[int, float]]],
    depth: int,
) -> list[Ranked]:
    """A second BM25 round: each query expanded by RM3 from its feedback documents.

    `feedback` per query: (corpus position, weight) of the documents judged relevant by the
    first round (the top `FB_DOCS` of `docs`, or of the fused list), best first.
    """
    return [
        index.search_weighted(_expand(index, query, fb[:FB_DOCS]), depth)
        for query, fb in zip(queries, feedback, strict=True)
    ]


def requery_hits(
    corpus: Corpus, ranked: Sequence[Ranked], queries: list[str], depth: int
) -> list[list[Hit]]:
    """The second round's `docs` hits, as the platform would return them."""
    return to_hits(corpus, list(ranked), SearchParams(queries=queries, limit=depth))
