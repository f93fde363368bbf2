"""Rerankers for the `comprehensive` mode: the contracts (`base`), the
offline ones (`offline`), the LLM one (`llm`), and which one a search gets (`choice`)."""

from fanfuse.rerank.base import (
    FusedOrder,
    PoolReranker,
    Reranked,
    Reranker,
    RerankOrder,
    apply_order,
    reordered,
)

__all__ = [
    "FusedOrder",
    "PoolReranker",
    "RerankOrder",
    "Reranked",
    "Reranker",
    "apply_order",
    "reordered",
]
