"""The SQLite store's health document: a change that returns None writes nothing. (The probe
claim raced among separate connections: tests/support/store_contract.py, run for every store.)"""

from __future__ import annotations

from pathlib import Path

from fanfuse.rules import health
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.models import PlatformHealth, utcnow


def test_a_change_that_returns_none_writes_nothing(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "h.db")
    assert store.update_health("docs", lambda stored: None) is None
    assert store.get_health() == {}
    now = utcnow()
    first = store.update_health("docs", lambda h: health.observed(h, "docs", 0.5, now))
    assert first == PlatformHealth(
        name="docs", latency_s=0.5, samples=1, recent_s=[0.5], updated_at=now
    )
    assert store.update_health("docs", lambda h: health.observed(h, "docs", 9.0, now)) == first
    assert store.get_health() == {"docs": first}  # too soon for a second sample: unchanged
