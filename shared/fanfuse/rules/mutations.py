"""The mutation types: what a pure rule hands a store to run inside its transaction.

A store reads the documents, calls the mutation, and writes what it returns, retrying the whole
read-modify-write when the transaction is contended (Firestore does): so a mutation is pure and
may run more than once. The rules (`lifecycle.py`, `quota.py`, `breaker.py`, `health.py`) build
them; the stores (`fanfuse.store`) run them; neither imports the other for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


class NeedsAllRuns(Exception):
    """Raised by a mutator that found, in what it read, that it needs every run of the task:
    the last platform's fan-in, which finalizes the search in the same transaction
    (rules/fan_in.py). The store reads the other runs in that transaction and runs it again
    (`applied`): a fan-in that is not the last reads its own run only, as before."""


def applied(
    mutate: Mutator,
    task: Task,
    found: Sequence[PlatformRun],
    read: Callable[[Sequence[str]], Sequence[PlatformRun]],
) -> Writes | None:
    """`mutate` on the task and the runs a store `found`, in the task's platform order; when it
    raises NeedsAllRuns, again with every run, the missing ones read by `read` (in the same
    transaction). Every store's `transact` runs its mutator through this."""
    runs = {r.name: r for r in found}
    try:
        return mutate(Snapshot(task=task, runs=_ordered(task, runs)))
    except NeedsAllRuns:
        missing = [name for name in task.platforms if name not in runs]
        runs |= {r.name: r for r in read(missing)} if missing else {}
        return mutate(Snapshot(task=task, runs=_ordered(task, runs)))


def _ordered(task: Task, runs: dict[str, PlatformRun]) -> dict[str, PlatformRun]:
    order = {name: i for i, name in enumerate(task.platforms)}
    return dict(sorted(runs.items(), key=lambda kv: order.get(kv[0], len(order))))


QuotaMutator = Callable[[QuotaBucket | None], tuple[QuotaBucket | None, float | None]]
"""Pure, like Mutator: the bucket read (None: none) -> (the bucket to write, or None to write
nothing; None when the start is admitted, else the seconds until it would be). See quota.py."""
