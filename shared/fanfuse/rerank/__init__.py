"""Rerankers for `comprehensive` mode: reorder a query's fused candidate pool (see modes.py)."""
