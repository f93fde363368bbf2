"""The mutation types: what a pure rule hands a store to run inside its transaction.

A store reads the documents, calls the mutation, and writes what it returns, retrying the whole
read-modify-write when the transaction is contended (Firestore does): so a mutation is pure and
may run more than once. The rules (`lifecycle.py`, `quota.py`, `breaker.py`, `health.py`) build
them; the stores (`fanfuse.store`) run them; neither imports the other for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fanfuse.wire.models import PlatformHealth, PlatformRun, QuotaBucket, Task

HealthChange = Callable[[PlatformHealth | None], PlatformHealth | None]
"""A health document's change (breaker.py, health.py): None leaves it as it is."""
HealthSwap = Callable[[PlatformHealth | None], tuple[PlatformHealth | None, PlatformHealth | None]]


def health_swap(change: HealthChange) -> HealthSwap:
    """`change` in a QuotaMutator's shape, for a store's one-document read-modify-write: (the
    document to write, None: nothing; what `update_health` returns, the document as stored
    afterwards)."""

    def swap(stored: PlatformHealth | None) -> tuple[PlatformHealth | None, PlatformHealth | None]:
        written = change(stored)
        return written, stored if written is None else written

    return swap


@dataclass
class Snapshot:
    """What a transaction read: the task and the platform runs it asked for."""

    task: Task
    runs: dict[str, PlatformRun]


@dataclass
class Writes:
    """What a transaction writes: whole documents, replaced."""

    task: Task | None = None
    runs: list[PlatformRun] = field(default_factory=list)
    contents: dict[str, str] = field(default_factory=dict)


Mutator = Callable[[Snapshot], Writes | None]
"""Pure: a store may call it more than once (Firestore retries contended transactions)."""

QuotaMutator = Callable[[QuotaBucket | None], tuple[QuotaBucket | None, float | None]]
"""Pure, like Mutator: the bucket read (None: none) -> (the bucket to write, or None to write
nothing; None when the start is admitted, else the seconds until it would be). See quota.py."""
