"""Bounds on every Firestore call, so a stalled backend ends in `StoreUnavailable`, never a hang.

Why: google-cloud-firestore's own defaults are 60 s per call (300 s for reads and queries), and
a timed-out read is retried on DEADLINE_EXCEEDED for up to 60 s more; a query stream even
restarts itself with no end while its retry predicate holds. A function whose store stalls would
hold its request (a start, a status poll, a worker's fan-in) until the platform kills it, with
nothing said. Here:

- every call the store makes gets `timeout` and `retry` (`Bounds.call`): at most `call_s`, and
  transient errors (UNAVAILABLE, RESOURCE_EXHAUSTED, the codes the library retries a commit on)
  retried only within that time; a timed-out call is not retried (the stall is the answer);
- a transaction (all its attempts, the reads, the lock this process queues it on) gets
  `transaction_s` in all: no new attempt starts after it (`Bounds.check`), so it ends within
  that plus its last attempt's begin, commit and rollback; the conditioned read-and-write of a
  quota or health document (`Bounds.contended`) retries for no longer either;
- the transaction's own begin, commit and rollback take no `timeout` in the client's API
  (`Transaction._begin/_commit/_rollback` call the generated client with its defaults):
  `bound_transactions` gives those three methods of the client's transport the same bounds as
  defaults. It reaches into the client's generated layer (`_firestore_api._transport`), checked
  by a test, and fails loudly rather than leave them unbounded if the library moves it.
- `surfaced` turns what a stall raises (DEADLINE_EXCEEDED, UNAVAILABLE, a retry that ran out, a
  transaction that ran out of attempts) into `StoreUnavailable`: a 503 with Retry-After, which
  Cloud Tasks retries and an app can act on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from fanfuse.store.surfacing import surfacing, until_won
from fanfuse.wire.errors import StoreUnavailable

if TYPE_CHECKING:
    from google.api_core.retry import Retry
    from google.cloud.firestore import Client, DocumentReference

T = TypeVar("T")

CALL_TIMEOUT_S = 10.0
"""One call: far above a healthy one (milliseconds), a small part of the default deadline
(120 s), and above a stall of a few seconds, which is waited out rather than failed."""
TRANSACTION_BUDGET_S = 30.0
"""All attempts of one transaction: Firestore retries a contended one (the emulator resolves
contention by ~2 s lock timeouts), but no new attempt starts after this."""
TRANSACTION_ATTEMPTS = 10
"""Fan-in from many platforms at once contends on the task document; retry generously."""
LOCK_STRIPES = 64
DELETE_BATCH = 500
"""Firestore's cap on the writes of one batch."""
CHAIN_DEPTH = 8


def _retry(seconds: float, until: float | None = None) -> Retry:
    """Transient errors retried within `seconds` (and, for a query stream, which restarts
    itself on whatever the predicate accepts, never after `until`)."""
    from google.api_core.exceptions import ResourceExhausted, ServiceUnavailable
    from google.api_core.retry import Retry

    def retryable(exc: BaseException) -> bool:
        transient = isinstance(exc, ServiceUnavailable | ResourceExhausted)
        return transient and (until is None or time.monotonic() < until)

    return Retry(predicate=retryable, initial=0.05, maximum=1.0, multiplier=2.0, timeout=seconds)


@dataclass(frozen=True)
class Bounds:
    call_s: float = CALL_TIMEOUT_S
    transaction_s: float = TRANSACTION_BUDGET_S

    def deadline(self) -> float:
        """When a transaction starting now must have ended (time.monotonic)."""
        return time.monotonic() + self.transaction_s

    def call(self, deadline: float | None = None) -> dict[str, Any]:
        """`timeout` and `retry` for one call: `call_s`, or less to end by `deadline`."""
        now = time.monotonic()
        end = now + self.call_s if deadline is None else min(now + self.call_s, deadline)
        self.check(end, "a call")
        return {"timeout": end - now, "retry": _retry(end - now, end)}

    def check(self, deadline: float, what: str) -> None:
        if time.monotonic() >= deadline:
            raise self.expired(what)

    def expired(self, what: str) -> StoreUnavailable:
        return StoreUnavailable(f"Firestore: {what} ran out of time; try again", self.call_s)

    def delete_tree(self, client: Client, ref: DocumentReference, subs: Sequence[str]) -> None:
        """`ref` and the documents of its sub-collections `subs`, in batches. Not the client's
        `recursive_delete`: its listing and its BulkWriter take no timeout."""
        refs = [doc for sub in subs for doc in ref.collection(sub).list_documents(**self.call())]
        refs.append(ref)
        for start in range(0, len(refs), DELETE_BATCH):
            batch = client.batch()
            for doc in refs[start : start + DELETE_BATCH]:
                batch.delete(doc)
            batch.commit(**self.call())

    def contended(self, what: str, once: Callable[[], T]) -> T:
        """`until_won` for a read and a write conditioned on it: at most TRANSACTION_ATTEMPTS
        tries and `transaction_s`."""
        from google.api_core.exceptions import Conflict, FailedPrecondition

        return until_won(
            what,
            once,
            (Conflict, FailedPrecondition),
            attempts=TRANSACTION_ATTEMPTS,
            multiplier=0.005,
            max_wait_s=0.2,
            retry_after_s=self.call_s,
            budget_s=self.transaction_s,
        )


class TaskLocks:
    """Transactions on one task from this process's threads go one at a time.

    Two transactions that both read the task document and then write it wait on each other's
    locks; the Firestore emulator resolves that only by its lock timeout (about 2 s per
    conflict, and 8 at once exhaust every retry), production Firestore by aborting one. Queuing
    them here costs nothing, since Firestore would serialize them anyway; contention between
    processes is still left to Firestore's transactions. A lock is waited for only until the
    transaction's deadline: its holder may be a call to a stalled store.
    """

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self._stripes = [threading.Lock() for _ in range(LOCK_STRIPES)]

    @contextmanager
    def hold(self, key: str, deadline: float) -> Iterator[None]:
        lock = self._stripes[hash(key) % LOCK_STRIPES]
        if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise self.bounds.expired("waiting for this process's other transaction")
        try:
            yield
        finally:
            lock.release()


def bound_transactions(client: Client, bounds: Bounds) -> None:
    """Give the transport's begin_transaction, commit and rollback `bounds` as defaults (the
    client's Transaction passes them none; see the module's docstring)."""
    from google.api_core.gapic_v1.method import wrap_method
    from google.cloud.firestore_v1.services.firestore.transports.base import DEFAULT_CLIENT_INFO

    api: Any = client._firestore_api
    transport = api._transport
    wrapped: dict[Any, Any] = transport._wrapped_methods
    for name in ("begin_transaction", "commit", "rollback"):
        method = getattr(transport, name)
        if method not in wrapped:
            raise RuntimeError(f"google-cloud-firestore changed: no wrapped {name} to bound")
        wrapped[method] = wrap_method(  # type: ignore[no-untyped-call]
            method,
            default_retry=_retry(bounds.call_s),
            default_timeout=bounds.call_s,
            client_info=DEFAULT_CLIENT_INFO,
        )


def stalled(exc: BaseException | None) -> bool:
    """What a stalled (or overloaded, or forever contended) store raises, found anywhere in
    the chain: a transaction whose begin timed out raises the library's "no transaction in
    progress" ValueError from its rollback, with the timeout as its context."""
    from google.api_core.exceptions import (
        Aborted,
        DeadlineExceeded,
        ResourceExhausted,
        RetryError,
        ServiceUnavailable,
    )

    for _ in range(CHAIN_DEPTH):
        if exc is None:
            return False
        if isinstance(exc, DeadlineExceeded | ServiceUnavailable | ResourceExhausted | RetryError):
            return True
        if isinstance(exc, ValueError) and isinstance(exc.__cause__, Aborted):
            return True  # Transaction.__call__: "Failed to commit transaction in N attempts."
        exc = exc.__cause__ or exc.__context__
    return False


surfaced = surfacing("Firestore", stalled, lambda store: store.bounds.call_s)
"""Every public method of a FirestoreStore raises StoreUnavailable for what `stalled`
recognizes."""
