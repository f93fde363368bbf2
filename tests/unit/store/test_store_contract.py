"""The TaskStore contract (tests/support/store_contract.py) on the SQLite store; separate
connections to one file stand for separate processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fanfuse.store.sqlite import SqliteStore
from tests.support.store_contract import Harness, StoreContract


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> Iterator[Harness]:
        path = tmp_path / "contract.db"
        store = SqliteStore(path)
        yield Harness(store=store, instance=lambda: SqliteStore(path))
        store.close()
