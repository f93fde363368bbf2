"""fanfuse: one search request, many platforms, one fused answer."""

__version__ = "0.1.0"
