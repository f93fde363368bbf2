"""The platform breaker through the embedded runtime (SQLite), against a local HTTP double: a
failing provider is suspended, a suspended platform is answered at once without a request, and
when the suspension ends exactly one probe request goes out."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.net.runner import Runner
from fanfuse.platforms import Registry
from fanfuse.rules import breaker
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.models import (
    BreakerState,
    FailureKind,
    PlatformHealth,
    PlatformRun,
    PlatformState,
    utcnow,
)
from tests.support.platforms import cases
from tests.support.platforms.harness import fixture

pytestmark = pytest.mark.timeout(60)


async def one_run(rt: EmbeddedRuntime) -> PlatformRun:
    view = await rt.search({"query": "rust async"})
    [run] = view.platform_runs
    return run


def stored(rt: EmbeddedRuntime, name: str) -> PlatformHealth:
    return rt.service.store.get_health()[name]


def assert_open_for(health: PlatformHealth, reason: FailureKind, seconds: float) -> None:
    assert health.state is BreakerState.OPEN and health.reason is reason
    assert health.retry_at is not None
    left = (health.retry_at - utcnow()).total_seconds()
    assert seconds - 10 < left <= seconds


async def test_429_suspends_for_3_min_then_one_probe_closes(
    server: HTTPServer, runner: Runner, settings: Settings
) -> None:
    server.expect_request("/search").respond_with_response(Response("slow down", status=429))
    platform = cases._searxng(server.url_for(""), max_attempts=2, max_pages=1)
    async with EmbeddedRuntime(settings, registry=Registry.of([platform]), runner=runner) as rt:
        first = await one_run(rt)
        assert first.state is PlatformState.FAILED and first.calls[0].status == 429
        health = stored(rt, "searxng")
        assert_open_for(health, FailureKind.RATE_LIMITED, 180)
        sent = len(server.log)
        assert sent == 2  # the runner's two attempts

        started = time.monotonic()
        second = await one_run(rt)
        assert time.monotonic() - started < 5  # at once, not after the 30 s deadline
        assert second.state is PlatformState.SUSPENDED
        assert second.retry_at == health.retry_at
        assert second.error is not None and "rate limited" in second.error
        assert second.calls == [] and len(server.log) == sent

        def slow_ok(_: Request) -> Response:
            time.sleep(0.5)  # the probe is still in flight when the second search looks
            body = fixture("searxng/results.json")
            return Response(body, status=200, content_type="application/json")

        server.clear()
        server.expect_request("/search").respond_with_handler(slow_ok)
        past = utcnow() - timedelta(seconds=1)  # the 3 minutes are over
        rt.service.store.update_health(
            "searxng", lambda h: h and h.model_copy(update={"retry_at": past})
        )
        views = await asyncio.gather(*(rt.search({"query": "rust async"}) for _ in range(2)))
        states = sorted(v.platform_runs[0].state for v in views)
        assert states == [PlatformState.SUCCEEDED, PlatformState.SUSPENDED]
        assert len(server.log) == 1  # exactly one probe
        after = stored(rt, "searxng")
        assert after.state is BreakerState.CLOSED and after.consecutive_failures == 0
        assert after.retry_at is None and after.probe_token is None


async def test_captcha_page_suspends_for_an_hour(
    server: HTTPServer, runner: Runner, settings: Settings
) -> None:
    antispider = {"Location": "http://weixin.sogou.com/antispider/?from=x"}
    server.expect_request("/weixin").respond_with_response(Response(status=302, headers=antispider))
    platform = cases._weixin(server.url_for(""))
    async with EmbeddedRuntime(settings, registry=Registry.of([platform]), runner=runner) as rt:
        first = await one_run(rt)
        assert first.state is PlatformState.FAILED and "anti-spider" in (first.error or "")
        assert_open_for(stored(rt, "weixin"), FailureKind.CAPTCHA, 3600)
        second = await one_run(rt)
        assert second.state is PlatformState.SUSPENDED and "captcha" in (second.error or "")
        assert len(server.log) == 1


async def test_three_failed_runs_in_a_row_suspend_for_5_s(
    server: HTTPServer, runner: Runner, settings: Settings
) -> None:
    server.expect_request("/search").respond_with_response(Response("oops", status=500))
    platform = cases._searxng(server.url_for(""), max_attempts=1)
    async with EmbeddedRuntime(settings, registry=Registry.of([platform]), runner=runner) as rt:
        for failures in (1, 2):
            assert (await one_run(rt)).state is PlatformState.FAILED
            health = stored(rt, "searxng")
            assert health.state is BreakerState.CLOSED
            assert health.consecutive_failures == failures
        assert (await one_run(rt)).state is PlatformState.FAILED
        assert_open_for(stored(rt, "searxng"), FailureKind.ERROR, 5)
        assert (await one_run(rt)).state is PlatformState.SUSPENDED
        assert len(server.log) == 3


async def test_ten_queries_the_provider_refuses_leave_it_closed_three_5xx_open_it(
    server: HTTPServer, runner: Runner, settings: Settings
) -> None:
    """A caller can make a provider answer 400 at will (a query too long): that is the caller's
    failure, reported on its run, and never suspends the platform for the other tenants. The
    provider's own 5xx, three runs in a row, still do."""
    refused = Response('{"error": "query too long"}', status=400, content_type="application/json")
    server.expect_request("/search").respond_with_response(refused)
    platform = cases._searxng(server.url_for(""), max_attempts=1, max_pages=1)
    async with EmbeddedRuntime(settings, registry=Registry.of([platform]), runner=runner) as rt:
        for _ in range(10):
            run = await one_run(rt)
            assert run.state is PlatformState.FAILED
            assert run.error is not None and "HTTP 400" in run.error
            assert "query too long" in run.error
        assert len(server.log) == 10  # every run asked the provider: nothing suspended
        health = rt.service.store.get_health().get("searxng")
        assert health is None or (
            health.state is BreakerState.CLOSED and health.consecutive_failures == 0
        )

        # One refused query among several: the others succeed, the refused one is listed.
        server.clear()
        bad = {"q": "bad", "format": "json", "pageno": "1"}
        server.expect_request("/search", query_string=bad).respond_with_response(refused)
        ok = Response(fixture("searxng/results.json"), content_type="application/json")
        server.expect_request("/search").respond_with_response(ok)
        view = await rt.search({"query": ["rust async", "bad"], "cache": "bypass"})
        [mixed] = view.platform_runs
        assert mixed.state is PlatformState.SUCCEEDED and mixed.results
        [failure] = mixed.failed_queries
        assert failure.query == "bad" and "HTTP 400" in failure.error

        server.clear()
        server.expect_request("/search").respond_with_response(Response("down", status=503))
        fresh = {"query": "rust async", "cache": "bypass"}  # the provider, not the cache
        for failures in (1, 2, 3):
            assert (await rt.search(fresh)).platform_runs[0].state is PlatformState.FAILED
            assert stored(rt, "searxng").consecutive_failures == failures
        assert_open_for(stored(rt, "searxng"), FailureKind.ERROR, 5)
        assert (await rt.search(fresh)).platform_runs[0].state is PlatformState.SUSPENDED
        assert len(server.log) == 3


async def test_a_hostile_result_page_never_counts_against_the_provider(
    server: HTTPServer, runner: Runner, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A result page whose charset breaks the decoder (`idna`) is the page's problem, whatever
    it does to the run (a failure after the searching stage, or the result's content error):
    the provider answered, so the breaker stays closed however often a caller aims at it."""
    monkeypatch.setenv("FANFUSE_CONTENT_ALLOW_LOOPBACK", "true")
    monkeypatch.delenv("FANFUSE_CONTENT_LLM_BASE_URL", raising=False)
    settings.content = Settings().content  # the tree reads its sections when it is built
    hit = {"title": "t", "url": server.url_for("/hostile"), "content": "s"}
    server.expect_request("/search").respond_with_data(
        json.dumps({"results": [hit]}), content_type="application/json"
    )
    page = "<html><body><p>" + "x" * 200 + ".example</p></body></html>"
    server.expect_request("/hostile").respond_with_data(
        page, content_type="text/html; charset=idna"
    )
    platform = cases._searxng(server.url_for(""), max_pages=1)
    runs = breaker.FAILURES_TO_OPEN + 2
    async with EmbeddedRuntime(settings, registry=Registry.of([platform]), runner=runner) as rt:
        for _ in range(runs):
            view = await rt.search(
                {"query": "rust async", "include_content": True, "cache": "bypass"}
            )
            assert view.platform_runs[0].state is not PlatformState.SUSPENDED
        health = rt.service.store.get_health().get("searxng")
    assert sum(1 for r, _ in server.log if r.path == "/search") == runs
    assert sum(1 for r, _ in server.log if r.path == "/hostile") == runs
    assert health is None or (
        health.state is BreakerState.CLOSED and health.consecutive_failures == 0
    )
