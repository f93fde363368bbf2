"""Benchmarks, evaluation, the local stacks and the provider stubs: never imported by a function."""
