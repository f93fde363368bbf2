"""Per-platform calls in flight: derived from each provider's documented rate limit, set per
deployment, and reported by `fanfuse platforms` (CLI, JSON, GET /platforms share `describe`)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from fanfuse.net.policy import (
    MAX_DERIVED_CONCURRENCY,
    SELF_HOSTED_CONCURRENCY,
    UNDOCUMENTED,
    UNDOCUMENTED_CONCURRENCY,
    RateLimit,
    concurrency_for,
)
from fanfuse.net.runner import Runner
from fanfuse.platforms import Registry, load_engine
from fanfuse.platforms.contract import PlatformContext, RunRecord, SearchParams
from fanfuse.platforms.http_api import HttpPlatform
from fanfuse.settings import Settings
from fanfuse.wire.instances import ExtraPlatform
from fanfuse.wire.models import Hit


def test_a_rate_gives_as_many_calls_in_flight_as_keep_it_busy() -> None:
    assert concurrency_for(RateLimit("r", per_second=10.0), 1.5) == 15  # 10/s x 1.5 s
    assert concurrency_for(RateLimit("r", per_second=100 / 60), 1.5) == 3
    assert concurrency_for(RateLimit("r", per_second=0.01), 1.5) == 1  # never zero
    assert concurrency_for(RateLimit("r", per_second=1000.0), 2.0) == MAX_DERIVED_CONCURRENCY


def test_a_named_limit_in_flight_wins_and_the_unknown_stay_conservative() -> None:
    assert concurrency_for(RateLimit("r", per_second=50.0, in_flight=1), 5.0) == 1
    assert concurrency_for(RateLimit("r", self_hosted=True), 1.0) == SELF_HOSTED_CONCURRENCY
    assert concurrency_for(UNDOCUMENTED, 1.0) == UNDOCUMENTED_CONCURRENCY


def test_every_provider_defaults_to_what_its_documented_limit_allows() -> None:
    registry = Registry()
    defaults = {}
    for name in registry.names():
        platform = registry.get(name)
        field = platform.settings_model.model_fields["max_concurrency"]
        if platform.rate_limit is None:
            assert not isinstance(platform, HttpPlatform), name  # only local ones call no one
            continue
        expected = concurrency_for(platform.rate_limit, type(platform).typical_latency_s)
        assert field.default == expected, name
        defaults[name] = field.default
    # The figures the documentation quotes (README, policy.py): one table, checked here.
    assert defaults["brave"] == 64 and defaults["searxng"] == 64
    assert defaults["tavily"] == 3 and defaults["google"] == 3
    assert defaults["wikipedia"] == 1 and defaults["arxiv"] == 1
    assert defaults["sec_edgar"] == 15 and defaults["perplexity"] == 24


def test_platforms_report_the_limit_in_force_and_a_deployment_sets_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FANFUSE_BRAVE_MAX_CONCURRENCY", "7")
    monkeypatch.setenv("FANFUSE_BRAVE_API_KEY", "k")
    extra = {
        "mine": ExtraPlatform(
            engine="searxng", settings={"base_url": "http://127.0.0.1:9", "max_concurrency": 200}
        )
    }
    rows = {
        row.name: row for row in Registry.from_settings(Settings(extra_platforms=extra)).describe()
    }
    assert rows["brave"].max_concurrency == 7
    assert (
        rows["brave"].rate_limit is not None and "50 requests a second" in rows["brave"].rate_limit
    )
    assert rows["mine"].max_concurrency == 200 and rows["mine"].available
    assert rows["docs"].max_concurrency is None and rows["docs"].rate_limit is None
    assert rows["tavily"].max_concurrency == 3 and not rows["tavily"].available  # its default


def test_a_concurrency_below_one_makes_the_platform_unavailable_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FANFUSE_SEARXNG_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("FANFUSE_SEARXNG_MAX_CONCURRENCY", "0")
    reason = Registry().unavailable_reason("searxng")
    assert reason is not None and "FANFUSE_SEARXNG_MAX_CONCURRENCY" in reason


class InFlight:
    """A provider double that counts the calls it is answering at once: each waits until the
    test lets it go, so nothing finishes while the test looks."""

    def __init__(self, results: int) -> None:
        self.results = results
        self.now = self.most = self.calls = 0
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        self.limit = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        self.now += 1
        self.most = max(self.most, self.now)
        if self.now >= self.limit:
            self.reached.set()
        try:
            await self.release.wait()
        finally:
            self.now -= 1
        query = request.url.params["q"]
        items = [{"url": f"https://{query}.example/{i}", "title": query} for i in range(2)]
        body = json.dumps({"results": items[: self.results]}).encode()
        # as a transport answers: a stream the runner reads under its size cap
        return httpx.Response(
            200, headers={"Content-Type": "application/json"}, stream=httpx.ByteStream(body)
        )


async def test_a_platform_never_has_more_calls_in_flight_than_its_setting() -> None:
    """Two searches of one platform in one process, six queries in all, share its limit of 2:
    the provider sees two calls at once, never more, and the rest wait for a free slot.

    Kills: `net/runner.py` `asyncio.Semaphore(max(limit, 1))` -> `asyncio.Semaphore(10_000)`."""
    provider = InFlight(results=2)
    provider.limit = 2
    runner = Runner(transport=httpx.MockTransport(provider))
    platform = load_engine(
        "searxng", "capped", {"base_url": "http://127.0.0.1:9", "max_concurrency": 2}
    )
    settings = platform.load_settings()
    assert settings.call_policy().max_concurrency == 2

    async def search(queries: list[str]) -> list[list[Hit]]:
        ctx = PlatformContext(settings=settings, runner=runner, record=RunRecord())
        return await platform.search(ctx, SearchParams(queries=queries, limit=2))

    try:
        first = asyncio.create_task(search(["a", "b", "c"]))
        second = asyncio.create_task(search(["d", "e", "f"]))
        async with asyncio.timeout(30):  # a bound on a failure, not a measure
            await provider.reached.wait()
        for _ in range(100):  # every waiting call gets its turn on the loop: none may enter
            await asyncio.sleep(0)
        assert (provider.now, provider.calls) == (2, 2)
        provider.release.set()
        found = [*await first, *await second]
    finally:
        provider.release.set()
        await runner.aclose()
    assert [len(hits) for hits in found] == [2] * 6
    assert provider.calls == 6 and provider.most == 2
