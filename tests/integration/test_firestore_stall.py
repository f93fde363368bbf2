"""Every Firestore store call is bounded: against a server that accepts the connection and
never answers (what a SIGSTOPped emulator or a stalled backend looks like to the client), each
operation of the port ends in StoreUnavailable (a 503 with Retry-After) within its bounds,
instead of the client library's 60 s (300 s for reads) per call, retried.

No emulator needed: the stalled server is a listening socket on loopback that is never served.
The emulator-backed counterpart (a 5 s SIGSTOP during a search) is tests/e2e/test_e2e_faults.py.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from google.api_core.exceptions import Aborted, DeadlineExceeded

from fanfuse.rules.mutations import Writes
from fanfuse.store.firestore import FirestoreStore
from fanfuse.store.firestore_calls import Bounds, TaskLocks, stalled
from fanfuse.wire.errors import StoreUnavailable
from fanfuse.wire.models import ApiKey, CacheEntry, utcnow
from tests.support.e2e.cloud import make_task

BOUNDS = Bounds(call_s=0.3, transaction_s=0.8)
WORST_S = BOUNDS.transaction_s + 3 * BOUNDS.call_s
"""A transaction starts no attempt after transaction_s; the one under way ends within its
begin, commit and rollback (call_s each; its reads end by the deadline)."""


@pytest.fixture(scope="module")
def store() -> Iterator[FirestoreStore]:
    from google.cloud import firestore

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)  # connections complete in the kernel; nobody ever reads them
        host = f"127.0.0.1:{server.getsockname()[1]}"
        with mock.patch.dict(os.environ, {"FIRESTORE_EMULATOR_HOST": host}):
            client = firestore.Client(project="stalled")
        stalled_store = FirestoreStore(client, bounds=BOUNDS)
        yield stalled_store
        stalled_store.close()


TASK, RUNS = make_task("t-stall", ["docs", "web"])
NOW = utcnow()
KEY = ApiKey(key_id="k1", secret_sha256="0" * 64, owner="alice", created_at=NOW)
ENTRY = CacheEntry(
    key="c1", platform="docs", query="q", limit=10, hits=[], stored_at=NOW, expires_at=NOW
)

OPERATIONS: dict[str, Callable[[FirestoreStore], Any]] = {
    "create": lambda s: s.create(TASK, RUNS),
    "withdraw": lambda s: s.withdraw("t-stall"),
    "get_task": lambda s: s.get_task("t-stall"),
    "get_runs": lambda s: s.get_runs("t-stall"),
    "patch_run": lambda s: s.patch_run("t-stall", "docs", {"message": "m"}, lease="x"),
    "transact": lambda s: s.transact("t-stall", ["docs"], lambda snap: Writes(task=snap.task)),
    "transact_all": lambda s: s.transact("t-stall", None, lambda snap: None),
    "get_contents": lambda s: s.get_contents("t-stall", ["c1"]),
    "get_cached": lambda s: s.get_cached("c1"),
    "put_cached": lambda s: s.put_cached(ENTRY),
    "get_health": lambda s: s.get_health(),
    "update_health": lambda s: s.update_health("docs", lambda stored: None),
    "put_key": lambda s: s.put_key(KEY),
    "get_key": lambda s: s.get_key("k1"),
    "list_keys": lambda s: s.list_keys(),
    "purge_expired": lambda s: s.purge_expired(NOW + timedelta(days=1)),
    "take_quota": lambda s: s.take_quota("alice", lambda bucket: (None, None)),
    "count_in_flight": lambda s: s.count_in_flight("alice", NOW),
}


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_a_call_to_a_stalled_store_is_store_unavailable_within_its_bounds(
    store: FirestoreStore, name: str
) -> None:
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as caught:
        OPERATIONS[name](store)
    took = time.monotonic() - started
    assert took < WORST_S, f"{name} took {took:.2f} s"
    assert caught.value.status_code == 503 and caught.value.retry_after_s == BOUNDS.call_s
    assert str(caught.value).startswith("Firestore") and "try again" in str(caught.value)


def test_a_transaction_queued_behind_a_stalled_one_gives_up_at_its_deadline() -> None:
    locks = TaskLocks(BOUNDS)
    holding, release = threading.Event(), threading.Event()

    def stalled_holder() -> None:
        with locks.hold("t1", time.monotonic() + 60):
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=stalled_holder)
    holder.start()
    try:
        assert holding.wait(5)
        started = time.monotonic()
        with (
            pytest.raises(StoreUnavailable, match="other transaction"),
            locks.hold("t1", BOUNDS.deadline()),
        ):
            pass
        assert BOUNDS.transaction_s <= time.monotonic() - started < WORST_S
    finally:
        release.set()
        holder.join(10)


def chained(
    exc: Exception, *, context: Exception | None = None, cause: Exception | None = None
) -> Exception:
    exc.__context__, exc.__cause__ = context, cause
    return exc


def test_what_counts_as_a_stall() -> None:
    # google-api-core's exception constructors are unannotated
    timed_out = DeadlineExceeded("deadline")  # type: ignore[no-untyped-call]
    assert stalled(timed_out)
    # a transaction whose begin timed out: the rollback's ValueError, the timeout its context
    assert stalled(chained(ValueError("no transaction in progress"), context=timed_out))
    # the retries of a contended transaction ran out
    aborted = Aborted("a")  # type: ignore[no-untyped-call]
    assert stalled(chained(ValueError("Failed to commit transaction"), cause=aborted))
    assert not stalled(ValueError("a bad value"))
    assert not stalled(chained(ValueError("bad"), context=KeyError("k")))
