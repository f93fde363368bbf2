"""Fixtures of the unit tests that run lifecycle rules in a real SQLite store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore


@pytest.fixture
def store(settings: Settings) -> Iterator[SqliteStore]:
    sqlite = SqliteStore(settings.db_path)
    yield sqlite
    sqlite.close()
