"""`fanfuse bench`: latency, load, cache, quota and serve benchmarks (common: what they share)."""
