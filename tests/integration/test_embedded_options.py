"""Per-request options end to end on the embedded runtime, against stub SearXNG platforms.

The same scenarios as tests/e2e/test_e2e_options.py (the emulator stack), from
tests/support/option_scenarios.py: per-query failures, domain filters over three platforms, a
`timeout_s` shorter than a platform, and the search cache.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.models import CacheEntry, TaskView
from tests.support import option_scenarios as sc

WEB = {"web_ok": "delay/0", **sc.DOUBLES}


@pytest.fixture(scope="module")
def module_stub() -> Iterator[StubSearxServer]:
    with StubSearxServer() as stub:
        yield stub


@pytest.fixture
def stub(module_stub: StubSearxServer) -> Iterator[StubSearxServer]:
    module_stub.reset()
    yield module_stub
    module_stub.reset()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "fanfuse.db"


@pytest.fixture
async def rt(stub: StubSearxServer, db_path: Path) -> AsyncIterator[EmbeddedRuntime]:
    settings = Settings.model_validate(
        {
            "db_path": db_path,
            "progress_interval": 0.0,
            "deadline_seconds": 30,
            "extra_platforms": sc.web_platforms(stub, WEB),
        }
    )
    async with EmbeddedRuntime(settings) as runtime:
        yield runtime


async def search(rt: EmbeddedRuntime, payload: dict[str, Any]) -> dict[str, Any]:
    view = await asyncio.wait_for(rt.search(payload), 30)
    return json_view(view)


def json_view(view: TaskView) -> dict[str, Any]:
    return view.model_dump(mode="json")


def run_of(view: dict[str, Any], name: str) -> dict[str, Any]:
    run: dict[str, Any] = next(r for r in view["platform_runs"] if r["name"] == name)
    return run


def stored_at(db_path: Path, query: str) -> datetime:
    """When the cache entry for `query` was written, read from the SQLite table itself."""
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT doc FROM cache").fetchall()
    entries = [CacheEntry.model_validate_json(doc) for (doc,) in rows]
    (entry,) = [e for e in entries if e.query == query]
    return entry.stored_at


async def test_a_query_that_fails_is_listed_and_the_search_is_partial(
    rt: EmbeddedRuntime,
) -> None:
    view = await search(rt, sc.MULTI_QUERY)
    sc.check_multi_query(view, run_of(view, "web_flaky"))


async def test_domain_filters_over_three_platforms(rt: EmbeddedRuntime) -> None:
    view = await search(rt, sc.DOMAINS)
    sc.check_domains(view, {name: run_of(view, name) for name in sc.REMOVED})


async def test_timeout_s_finalizes_with_what_arrived(rt: EmbeddedRuntime) -> None:
    # Warm up first: the first search of a process imports the platforms and the stages, a
    # one-off cost (0.4 s here) that the bound is not about.
    assert await search(rt, {"query": "warm-up", "platform": "web_ok", "cache": "bypass"})
    started = time.perf_counter()
    accepted = rt.service.start(sc.TIMEOUT)
    view = await asyncio.wait_for(rt.wait(accepted.task_id, poll=sc.POLL), 30)
    elapsed = time.perf_counter() - started
    print(f"\nembedded: timeout_s 1 ended {elapsed:.3f} s after the start")
    sc.check_timeout(json_view(view), elapsed)


async def test_a_repeated_search_is_served_from_the_cache(
    rt: EmbeddedRuntime, stub: StubSearxServer, db_path: Path
) -> None:
    payload = {"query": "cached query", "platform": ["web_ok"]}
    first = await search(rt, payload)
    sc.check_cache(run_of(first, "web_ok"), "miss", "auto")
    assert stub.requests["delay/0"] == 1
    stored = stored_at(db_path, "cached query")

    again = await search(rt, payload)
    assert stub.requests["delay/0"] == 1  # not asked again
    sc.check_cache(run_of(again, "web_ok"), "hit", "auto")
    assert again["status"] == "completed"
    assert [r["url"] for r in again["results"]] == [r["url"] for r in first["results"]]

    await asyncio.sleep(sc.REWRITE_GAP)  # as on Firestore, which rewrites an entry once a second
    fresh = await search(rt, {**payload, "cache": "bypass"})
    assert stub.requests["delay/0"] == 2  # asked again
    sc.check_cache(run_of(fresh, "web_ok"), "miss", "bypass")
    assert stored_at(db_path, "cached query") > stored  # and the entry refreshed

    never = await search(rt, {"query": "never seen", "platform": ["web_ok"], "cache": "only"})
    sc.check_not_cached(never)
    assert stub.requests["delay/0"] == 2
