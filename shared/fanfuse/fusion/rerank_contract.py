"""The reranker contracts: one query's fused candidates in, a new order out.

Two shapes. `Reranker` is pure and synchronous (the offline rerankers, which `fanfuse eval`
scores); `PoolReranker` is what the aggregator calls, async because the LLM reranker does I/O,
and answers with a `RerankOrder` that `aggregate.final_document` applies with `apply_order`
inside the finalizing transaction (rerank/choice.py adapts a `Reranker` to it).

A `Reranker` runs after fusion, on the candidates of one query (the `comprehensive` mode).
It is a pure function of its arguments: no I/O, no clock, no randomness,
so that it gives the same order on Cloud Functions, in the embedded runtime and in `fanfuse
eval`. A reranker that needs I/O (an LLM endpoint) does it behind this same signature and says
in `Reranked.method` / `note` what it actually did (for instance that it fell back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from fanfuse.wire.models import RerankNote, Result


@dataclass(frozen=True)
class Reranked:
    """The reranked results, best first, and what was done to get them.

    `results` are copies of (some of) the candidates with `rank` renumbered from 1 and `score`
    the reranker's score; the fused rank and score stay in `metadata["fused_rank"]` and
    `metadata["fused_score"]`. `method` names the reranker that ran (a fallback names itself);
    `note` says in a sentence what it did (or why it kept the fused order).
    """

    results: list[Result]
    method: str
    note: str = ""


class Reranker(Protocol):
    def rerank(self, query: str, candidates: Sequence[Result], limit: int) -> Reranked:
        """At most `limit` of `candidates` (fused order, best first) in a new order."""
        ...


def reordered(candidates: Sequence[Result], scores: Sequence[float], limit: int) -> list[Result]:
    """The candidates by descending score, at most `limit`, ranks renumbered.

    Ties keep the fused order (the candidates' order), so the result never depends on anything
    but the arguments. The fused rank and score are kept in the metadata.
    """
    if len(scores) != len(candidates):
        raise ValueError(f"{len(scores)} scores for {len(candidates)} candidates")
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))[:limit]
    return [
        candidates[i].model_copy(
            update={
                "rank": new_rank,
                "score": float(scores[i]),
                "metadata": {
                    **candidates[i].metadata,
                    "fused_rank": candidates[i].rank,
                    "fused_score": candidates[i].score,
                },
            }
        )
        for new_rank, i in enumerate(order, start=1)
    ]


@dataclass(frozen=True)
class FusedOrder:
    """The no-op reranker: the fused order and scores, cut to `limit`.

    What `comprehensive` falls back to when no reranker is configured or none beats fusion.
    """

    method: str = "fused"

    def rerank(self, query: str, candidates: Sequence[Result], limit: int) -> Reranked:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        return Reranked(list(candidates[:limit]), self.method, "kept the fused order")


@dataclass(frozen=True)
class RerankOrder:
    """What the aggregator applies to one query's pool: result URLs best first, and the note
    for the final document. Results the order does not name keep their fused order after it."""

    order: list[str]
    note: RerankNote


class PoolReranker(Protocol):
    """A reranker as the aggregator calls it: async, because the LLM one does I/O, and it never
    raises (a failure is a note and the fused order)."""

    async def order(self, query: str, candidates: Sequence[Result]) -> RerankOrder: ...


def apply_order(results: Sequence[Result], order: Sequence[str], limit: int) -> list[Result]:
    """`results` in `order` (unknown URLs ignored, unnamed results after, in fused order),
    renumbered and cut to `limit`. `score` stays the fused score: the reranker's own scale
    (an LLM's order, say) is not comparable across searches."""
    position = {url: i for i, url in enumerate(order)}
    ranked = sorted(
        range(len(results)), key=lambda i: (position.get(results[i].url, len(order)), i)
    )
    return [
        results[i].model_copy(update={"rank": rank}) for rank, i in enumerate(ranked[:limit], 1)
    ]
