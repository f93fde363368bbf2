"""Rerankers for the `comprehensive` mode: the contract (`base`), the offline ones (`offline`)."""

from fanfuse.rerank.base import FusedOrder, Reranked, Reranker, reordered

__all__ = ["FusedOrder", "Reranked", "Reranker", "reordered"]
