"""Provider pacing (service/pacing.py): a provider's rate held across a deployment's workers
through the store's bucket, before the provider would answer 429; on the call records and in
the stats."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fanfuse.http import stats_route
from fanfuse.platforms import Registry
from fanfuse.platforms.searxng import SearxngPlatform
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.service.pacing import Pacer, pace_limit, pace_subject
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.instances import ExtraPlatform
from fanfuse.wire.models import TaskStatus, utcnow

pytestmark = pytest.mark.timeout(90)

RATE = 4.0


class FakeTime:
    """A clock that only the pacers' sleeps move: two workers' waits, without waiting."""

    def __init__(self) -> None:
        self.now = utcnow()

    def clock(self) -> datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


async def test_two_workers_on_one_store_share_one_providers_rate(tmp_path: Path) -> None:
    """Each take is admitted at most at burst + rate x t over any t, whichever worker takes."""
    time = FakeTime()
    stores = [SqliteStore(tmp_path / "paced.db") for _ in range(2)]  # two connections
    try:
        workers = [Pacer(s, time.clock, sleep=time.sleep) for s in stores]
        limit = pace_limit(RATE)
        admitted: list[datetime] = []
        for i in range(24):  # alternate the workers, as calls from two instances would come
            await workers[i % 2].wait(pace_subject("brave"), limit)
            admitted.append(time.now)
    finally:
        for store in stores:
            store.close()
    start = admitted[0]
    offsets = [(at - start).total_seconds() for at in admitted]
    for i, first in enumerate(offsets):
        for j in range(i, len(offsets)):
            calls = j - i + 1
            assert calls <= limit.burst + RATE * (offsets[j] - first) + 1e-6, (i, j, offsets)
    assert offsets[-1] >= (24 - limit.burst) / RATE - 1e-6  # so it waited, not skipped


def test_a_platforms_pace_is_its_documented_rate_unless_set_or_off() -> None:
    from fanfuse.platforms.brave import BravePlatform

    assert BravePlatform().pace_per_second(None) == 50.0  # its documented plan
    base = {"base_url": "http://127.0.0.1:9"}
    plain = SearxngPlatform(overrides=base)
    assert plain.pace_per_second(plain.load_settings()) is None  # self-hosted: not paced
    paced = SearxngPlatform(overrides={**base, "pace_per_second": 2.5})
    assert paced.pace_per_second(paced.load_settings()) == 2.5
    off = BravePlatform(overrides={"api_key": "k", "pace": False})
    assert off.pace_per_second(off.load_settings()) is None


@pytest.fixture
def stub() -> Iterator[StubSearxServer]:
    with StubSearxServer() as server:
        yield server


def paced_settings(stub: StubSearxServer, db: Path) -> Settings:
    platform = {"base_url": stub.url("delay/0"), "max_attempts": 1, "pace_per_second": RATE}
    return Settings(
        db_path=db,
        extra_platforms={"web_paced": ExtraPlatform(engine="searxng", settings=platform)},
        progress_interval=0.0,
        deadline_seconds=30,
    )


async def test_two_runtimes_on_one_database_keep_the_providers_pace_and_say_so(
    stub: StubSearxServer, tmp_path: Path
) -> None:
    """Two embedded runtimes (two workers of one deployment) search one paced provider at once:
    its requests arrive no faster than its pace, the waits are on the call records, and the
    stats count them."""
    settings = paced_settings(stub, tmp_path / "shared.db")
    body: dict[str, Any] = {
        "query": [f"q{i}" for i in range(5)],
        "platform": "web_paced",
        "cache": "bypass",
    }
    async with EmbeddedRuntime(settings) as one, EmbeddedRuntime(settings) as two:
        views = await asyncio.gather(one.search(body), two.search(body))
        assert all(v.status is TaskStatus.COMPLETED for v in views)
        calls = [c for v in views for r in v.platform_runs for c in r.calls]
        figures = stats_route.collect(
            one.service.store,
            one.service.store,
            stats_route.StatsQuery(timedelta(hours=1), None),
            utcnow(),
        )
    arrivals = sorted(stub.arrivals["delay/0"])
    assert len(arrivals) == 10
    burst = pace_limit(RATE).burst
    for i, first in enumerate(arrivals):
        for j in range(i, len(arrivals)):
            calls_in = j - i + 1  # 0.1 s: two clocks, the request's way to the stub
            assert calls_in <= burst + RATE * (arrivals[j] - first + 0.1), (i, j)
    waited = [c.paced_s for c in calls if c.paced_s > 0]
    assert len(waited) >= 10 - burst
    [row] = [p for p in figures.platforms if p.name == "web_paced"]
    assert row.paced_calls == len(waited)
    assert row.paced_s == pytest.approx(sum(waited), abs=1e-3)


async def test_a_store_that_fails_lets_the_call_go(tmp_path: Path) -> None:
    class Broken(SqliteStore):
        def take_quota(self, key: str, mutate: Any) -> float | None:
            raise OSError("the store is down")

    store = Broken(tmp_path / "broken.db")
    try:
        pacer = Pacer(store, utcnow)
        assert await pacer.wait(pace_subject("brave"), pace_limit(1.0)) == 0.0
    finally:
        store.close()


def test_a_registry_lists_each_platforms_pace(stub: StubSearxServer, tmp_path: Path) -> None:
    registry = Registry(extra=paced_settings(stub, tmp_path / "x.db").extra_platforms)
    rows = {row.name: row for row in registry.describe()}
    assert rows["web_paced"].pace_per_second == RATE
    assert rows["docs"].pace_per_second is None
