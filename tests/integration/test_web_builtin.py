"""`builtin` (an LLM's own search) and its fallback to `perplexity`, end to end."""

from __future__ import annotations

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from fanfuse.net.runner import Runner
from fanfuse.platforms import Registry
from fanfuse.platforms.builtin import BuiltinPlatform
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.models import PlatformState, TaskStatus
from tests.support.platforms.harness import fixture

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("FANFUSE_BUILTIN_API_KEY", "FANFUSE_PERPLEXITY_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def perplexity_on(server: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FANFUSE_PERPLEXITY_API_KEY", "pplx-test")
    monkeypatch.setenv("FANFUSE_PERPLEXITY_BASE_URL", server.url_for("/pplx"))
    server.expect_request("/pplx/search", method="POST").respond_with_data(
        fixture("perplexity/results.json"), content_type="application/json"
    )


async def test_unconfigured_builtin_falls_back_to_perplexity_visibly(
    server: HTTPServer,
    runner: Runner,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    perplexity_on(server, monkeypatch)
    platform = BuiltinPlatform()
    assert platform.availability() is None  # available through its fallback
    async with EmbeddedRuntime(settings, registry=Registry.of([platform]), runner=runner) as rt:
        view = await rt.search({"query": "rust async runtime", "platform": "builtin"})
    assert view.status is TaskStatus.COMPLETED
    run = view.platform_runs[0]
    assert run.provider == "perplexity"
    assert [c.platform for c in run.calls] == ["perplexity"]
    assert view.results and all(r.metadata["provider"] == "perplexity" for r in view.results)
    assert "FANFUSE_BUILTIN_API_KEY" in view.results[0].metadata["fallback_reason"]


async def test_failing_builtin_falls_back_and_says_why(
    server: HTTPServer,
    runner: Runner,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    perplexity_on(server, monkeypatch)
    server.expect_request("/qwen/chat/completions").respond_with_response(
        Response("overloaded", status=503)
    )
    platform = BuiltinPlatform(
        overrides={"api_key": "sk-test", "base_url": server.url_for("/qwen"), "max_attempts": 2}
    )
    async with EmbeddedRuntime(settings, registry=Registry.of([platform]), runner=runner) as rt:
        view = await rt.search({"query": "rust async runtime", "platform": "builtin"})
    run = view.platform_runs[0]
    assert run.state is PlatformState.SUCCEEDED and run.provider == "perplexity"
    assert [c.platform for c in run.calls] == ["builtin", "perplexity"]
    reason = view.results[0].metadata["fallback_reason"]
    assert reason.startswith("builtin failed: HTTP 503") and "2 attempt(s)" in reason


async def test_configured_builtin_answers_with_its_own_sources(
    server: HTTPServer, runner: Runner, settings: Settings
) -> None:
    server.expect_request("/qwen/chat/completions", method="POST").respond_with_data(
        fixture("builtin/qwen.json"), content_type="application/json"
    )
    platform = BuiltinPlatform(
        overrides={"api_key": "sk-test", "base_url": server.url_for("/qwen")}
    )
    async with EmbeddedRuntime(settings, registry=Registry.of([platform]), runner=runner) as rt:
        view = await rt.search({"query": "rust async runtime", "platform": "builtin"})
    assert view.platform_runs[0].provider == "qwen"
    assert [r.url for r in view.results] == [
        "https://tokio.rs/",
        "https://rust-lang.github.io/async-book/",
        "https://github.com/smol-rs/smol",
    ]
    assert view.results[0].metadata["answer"].startswith("Tokio is the most widely used")


def test_neither_configured_names_both_settings() -> None:
    reason = BuiltinPlatform().availability()
    assert reason is not None
    assert "FANFUSE_BUILTIN_API_KEY" in reason and "FANFUSE_PERPLEXITY_API_KEY" in reason
