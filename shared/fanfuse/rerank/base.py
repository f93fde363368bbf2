"""What every reranker returns, and the one pure way an order is applied to fused results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from fanfuse.models import RerankNote, Result


@dataclass(frozen=True)
class Reranked:
    order: list[str]
    """Result URLs best first; results it does not name keep their fused order after these."""
    note: RerankNote


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


class Reranker(Protocol):
    async def rerank(self, query: str, candidates: Sequence[Result]) -> Reranked:
        """`candidates` (one query's fused pool, best first) in a new order; never raises."""
        ...
