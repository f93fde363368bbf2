"""Canonical URLs, dedup, the fusers, the fused order and a reranker's order: pure functions."""
