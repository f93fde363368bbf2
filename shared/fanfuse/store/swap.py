"""One read-modify-write of one document, conditioned on what was read: the step the cloud stores'
health and quota writes share (`update_health`, `take_quota`).

Both stores do the same four things: read the document with its version, let the pure change
decide (`rules/mutations.py`: the document to write, None for nothing, and the answer), write it
only if the document is still at that version (created only if still absent), and return the
answer. What differs is only the mechanics, so those stay in each store: how a version is read
and checked (Firestore: the snapshot's `update_time` as a write precondition; DynamoDB: a `ver`
attribute in a ConditionExpression), how a lost race shows (Conflict / FailedPrecondition;
ConditionalCheckFailed), and how the retry is bounded (`Bounds.contended`, `DynamoStore._contended`,
both `surfacing.until_won`). SQLite needs none of it: its write lock makes the read-modify-write
one transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

D = TypeVar("D")
R = TypeVar("R")
V = TypeVar("V")

Change = Callable[[D | None], tuple[D | None, R]]
"""A one-document change: the stored document (None: none yet) to (the document to write, None:
nothing; the answer). `rules/mutations.py`'s QuotaMutator and `health_swap` have this shape."""


def swap_once(
    read: Callable[[], tuple[D | None, V]],
    change: Change[D, R],
    write_if_unchanged: Callable[[D, V], None],
) -> R:
    """`read` (the document and its version), `change`, then `write_if_unchanged(written,
    version)` when there is something to write. Raises what that write raises when the document
    moved since the read: the caller's retry (`until_won`) runs the whole step again from the
    read, so `change` may run more than once (it is pure)."""
    stored, version = read()
    written, answer = change(stored)
    if written is not None:
        write_if_unchanged(written, version)
    return answer
