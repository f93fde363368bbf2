"""The SQLite store's health document: `update_health` is one BEGIN IMMEDIATE transaction, so
of many instances (separate connections) claiming a breaker's probe at once exactly one gets it;
a change that returns None writes nothing. (tests/e2e/test_e2e_firestore_store.py: Firestore.)"""

from __future__ import annotations

from pathlib import Path

from fanfuse import health
from fanfuse.models import PlatformHealth, utcnow
from fanfuse.store.sqlite import SqliteStore
from tests.health_checks import race_probe


def test_one_probe_among_separate_connections(tmp_path: Path) -> None:
    stores = [SqliteStore(tmp_path / "h.db") for _ in range(4)]
    assert race_probe(stores, "searxng") == 1


def test_a_change_that_returns_none_writes_nothing(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "h.db")
    assert store.update_health("docs", lambda stored: None) is None
    assert store.get_health() == {}
    now = utcnow()
    first = store.update_health("docs", lambda h: health.observed(h, "docs", 0.5, now))
    assert first == PlatformHealth(name="docs", latency_s=0.5, samples=1, updated_at=now)
    assert store.update_health("docs", lambda h: health.observed(h, "docs", 9.0, now)) == first
    assert store.get_health() == {"docs": first}  # too soon for a second sample: unchanged
