"""`present(x)`: a value the test expects to be there, typed without its `None`."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def present(value: T | None) -> T:
    """`value`, which must not be None: the assert is the test's own check (a missing task,
    key or bucket fails here, naming nothing else), and mypy then knows the type."""
    assert value is not None
    return value
