"""The breaker's probe claim raced across stores (threads; separate connections or clients stand
for separate instances): exactly one claimant may probe. Shared by the SQLite test and the
Firestore emulator test (tests/e2e/test_e2e_firestore_store.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import timedelta

from fanfuse.rules import breaker
from fanfuse.store.ports import HealthStore
from fanfuse.wire.models import BreakerState, FailureKind, PlatformHealth, utcnow

CLAIMANTS = 8


def race_probe(stores: Sequence[HealthStore], name: str) -> int:
    """Open `name`'s breaker with its retry time passed, then have CLAIMANTS threads claim the
    probe at once; returns how many were told they hold it."""
    now = utcnow()
    opened = breaker.on_failure(None, name, FailureKind.RATE_LIMITED, now - timedelta(hours=1))
    assert opened is not None and opened.retry_at is not None and opened.retry_at < now
    put_health(stores[0], opened)
    winners: list[str] = []
    start = threading.Barrier(CLAIMANTS)

    def claim(i: int) -> None:
        token = f"claimant-{i}"

        def change(health: PlatformHealth | None) -> PlatformHealth | None:
            return breaker.claim_probe(health, token, utcnow())

        start.wait(30)
        stored = stores[i % len(stores)].update_health(name, change)
        if stored is not None and stored.probe_token == token:
            winners.append(token)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(CLAIMANTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    final = stores[0].get_health()[name]
    assert final.state is BreakerState.HALF_OPEN and [final.probe_token] == winners
    assert final.reason is FailureKind.RATE_LIMITED
    return len(winners)


def put_health(store: HealthStore, health: PlatformHealth) -> None:
    """Store `health` as it is (a test's starting point), through the port's one write path."""
    store.update_health(health.name, lambda _: health)
