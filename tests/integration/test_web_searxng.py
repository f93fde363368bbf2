"""Named SearXNG instances (FANFUSE_EXTRA_PLATFORMS) end to end through the embedded runtime."""

from __future__ import annotations

import json

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from fanfuse.net.runner import Runner
from fanfuse.platforms import Registry
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.models import PlatformState, TaskStatus
from tests.support.platforms.harness import fixture

pytestmark = pytest.mark.timeout(60)


def extra_platforms(server: HTTPServer) -> str:
    return json.dumps(
        {
            "searx_ok": {"engine": "searxng", "settings": {"base_url": server.url_for("/ok")}},
            "searx_down": {
                "engine": "searxng",
                "settings": {"base_url": server.url_for("/down"), "max_attempts": 2},
            },
        }
    )


async def test_named_instances_one_failing_make_a_partial_search(
    server: HTTPServer,
    runner: Runner,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server.expect_request("/ok/search").respond_with_data(
        fixture("searxng/results.json"), content_type="application/json"
    )
    server.expect_request("/down/search").respond_with_response(Response("busy", status=503))
    monkeypatch.setenv("FANFUSE_EXTRA_PLATFORMS", extra_platforms(server))
    registry = Registry(extra=Settings().extra_platforms)
    assert registry.unavailable_reason("searx_ok") is None
    async with EmbeddedRuntime(settings, registry=registry, runner=runner) as rt:
        view = await rt.search({"query": "rust async", "platform": ["searx_ok", "searx_down"]})
    assert view.status is TaskStatus.PARTIAL
    runs = {r.name: r for r in view.platform_runs}
    assert runs["searx_ok"].state is PlatformState.SUCCEEDED
    assert runs["searx_ok"].calls[0].status == 200
    assert str(runs["searx_ok"].calls[0].url).startswith(server.url_for("/ok/search"))
    down = runs["searx_down"]
    assert down.state is PlatformState.FAILED
    assert down.error is not None and down.error.startswith("searx_down: HTTP 503")
    assert "2 attempt(s)" in down.error
    assert down.calls[0].attempts == 2
    assert [r.url for r in view.results][:1] == ["https://tokio.rs/"]
    assert view.summary is not None
    assert view.summary.message == (
        "Multi-platform search completed: 1/2 platforms, 3 total results (1 failed)"
    )


async def test_searxng_without_a_base_url_is_unavailable_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FANFUSE_SEARXNG_BASE_URL", raising=False)
    reason = Registry().unavailable_reason("searxng")
    assert reason is not None and "FANFUSE_SEARXNG_BASE_URL" in reason
