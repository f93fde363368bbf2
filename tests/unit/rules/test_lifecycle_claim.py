"""lifecycle.claim refuses a platform its search does not have with a typed, permanent error.

A Cloud Tasks target must tell such a delivery (acknowledged, never retried) from a failure of
the store (retried), so the error is UnknownPlatform, a 400 naming `platform`, not a KeyError.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from fanfuse.platforms import Registry
from fanfuse.rules import lifecycle
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.ports import TaskStore
from fanfuse.wire.errors import InvalidRequest, UnknownPlatform
from fanfuse.wire.models import PlatformState, utcnow
from tests.support.fakes import FakePlatform, HeldQueue

pytestmark = pytest.mark.every_store  # on SQLite and on DynamoDB (tests/unit/conftest.py)

LEASE = timedelta(seconds=30)


def started(store: TaskStore, settings: Settings) -> str:
    """A search of `docs` only, on a registry that also knows `web`."""
    registry = Registry.of([FakePlatform("docs"), FakePlatform("web")])
    service = SearchService(store, HeldQueue(), registry, settings)
    return service.start({"query": "q", "platform": "docs"}).task_id


def test_claiming_a_platform_the_search_lacks_raises_unknown_platform(
    store: TaskStore, settings: Settings
) -> None:
    task_id = started(store, settings)
    with pytest.raises(UnknownPlatform) as info:
        store.transact(task_id, ["web"], lifecycle.claim("web", utcnow(), "w1", lease=LEASE))
    error = info.value
    assert isinstance(error, InvalidRequest) and error.status_code == 400
    assert error.platform == "web"
    assert [(p.field, p.problem) for p in error.problems] == [
        ("platform", "'web' is not a platform of this search")
    ]
    assert [(r.name, r.state) for r in store.get_runs(task_id)] == [("docs", PlatformState.QUEUED)]

    claimed = store.transact(
        task_id, ["docs"], lifecycle.claim("docs", utcnow(), "w1", lease=LEASE)
    )
    assert claimed is not None and [r.state for r in claimed.runs] == [PlatformState.RUNNING]


def test_a_final_search_still_refuses_a_platform_it_lacks(
    store: TaskStore, settings: Settings
) -> None:
    """Checked before "terminal means no-op", so a stray task is dropped, not skipped."""
    task_id = started(store, settings)
    store.transact(task_id, None, lifecycle.finalize(utcnow(), force=True))
    task = store.get_task(task_id)
    assert task is not None and task.status.terminal
    with pytest.raises(UnknownPlatform):
        store.transact(task_id, ["web"], lifecycle.claim("web", utcnow(), "w1", lease=LEASE))
    assert (
        store.transact(task_id, ["docs"], lifecycle.claim("docs", utcnow(), "w1", lease=LEASE))
        is None
    )
