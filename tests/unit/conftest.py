"""Fixtures of the unit tests that run lifecycle rules in a real store: SQLite, and for a module
marked `every_store` (test_lease.py, test_lifecycle_claim.py) DynamoDB on moto too, so the same
rules are seen to hold in each store's own transactions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fanfuse.settings import Settings
from fanfuse.store.ports import TaskStore
from fanfuse.store.sqlite import SqliteStore
from tests.support.aws_fixtures import open_dynamo

STORES = ["sqlite", "dynamodb"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store" in metafunc.fixturenames and metafunc.definition.get_closest_marker("every_store"):
        metafunc.parametrize("store_kind", STORES, indirect=True)


@pytest.fixture
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = getattr(request, "param", "sqlite")
    return kind


@pytest.fixture
def store(
    settings: Settings, store_kind: str, request: pytest.FixtureRequest
) -> Iterator[TaskStore]:
    if store_kind == "dynamodb":
        opened: TaskStore = open_dynamo(request.getfixturevalue("aws_settings"))
    else:
        opened = SqliteStore(settings.db_path)
    yield opened
    opened.close()


@pytest.fixture(autouse=True)
def _url_forms_start_cold() -> None:
    """The URL forms are memoized per process (fusion/urls.py): each test starts with them
    forgotten, so it checks the code it runs, not an answer an earlier test left (mutation
    testing forks every mutant from a process whose memo the unmutated code filled)."""
    from fanfuse.fusion.urls import canonical_url, clean_url

    clean_url.cache_clear()
    canonical_url.cache_clear()
