"""`builtin` (an LLM's own search) and its fallback to `perplexity`, end to end."""

from __future__ import annotations

from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from fanfuse.net.runner import Runner
from fanfuse.platforms import Registry
from fanfuse.platforms.builtin import BuiltinPlatform
from fanfuse.platforms.contract import Platform
from fanfuse.platforms.perplexity import PerplexityPlatform
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.service.catalog import Catalog
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.chain import MemberState
from fanfuse.wire.errors import InvalidRequest
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
    """The design's builtin -> perplexity fallback is the deployment's default chain: builtin
    named alone carries it, and with no key of its own is passed over, saying why."""
    perplexity_on(server, monkeypatch)
    platforms: list[Platform[Any]] = [BuiltinPlatform(), PerplexityPlatform()]
    assert platforms[0].availability() is not None  # not itself: through its chain
    async with EmbeddedRuntime(settings, registry=Registry.of(platforms), runner=runner) as rt:
        view = await rt.search({"query": "rust async runtime", "platform": "builtin"})
    assert view.status is TaskStatus.COMPLETED
    run = view.platform_runs[0]
    assert run.chain == ["builtin", "perplexity"] and run.answered_by == ["perplexity"]
    skipped, answered = run.members
    assert (skipped.name, skipped.state) == ("builtin", MemberState.SKIPPED)
    assert skipped.reason is not None and "FANFUSE_BUILTIN_API_KEY" in skipped.reason
    assert (answered.name, answered.state) == ("perplexity", MemberState.ANSWERED)
    assert [c.platform for c in run.calls] == ["perplexity"]
    assert view.results and all(r.platforms == ["perplexity"] for r in view.results)


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
    builtin = BuiltinPlatform(
        overrides={"api_key": "sk-test", "base_url": server.url_for("/qwen"), "max_attempts": 2}
    )
    registry = Registry.of([builtin, PerplexityPlatform()])
    async with EmbeddedRuntime(settings, registry=registry, runner=runner) as rt:
        view = await rt.search({"query": "rust async runtime", "platform": "builtin"})
    run = view.platform_runs[0]
    assert run.state is PlatformState.SUCCEEDED and run.answered_by == ["perplexity"]
    assert [c.platform for c in run.calls] == ["builtin", "perplexity"]
    failed = run.members[0]
    assert (failed.name, failed.state, failed.role) == ("builtin", MemberState.FAILED, "primary")
    assert failed.reason is not None and failed.reason.startswith("HTTP 503")
    assert "2 attempt(s)" in failed.reason
    assert run.members[1].role == "fallback"
    assert view.results and all(r.platform == "perplexity" for r in view.results)


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


def test_neither_configured_names_both_settings(settings: Settings) -> None:
    """builtin carries its default chain, so a 400 says why neither member can answer."""
    registry = Registry.of([BuiltinPlatform(), PerplexityPlatform()])
    catalog = Catalog(SqliteStore(settings.db_path), registry, settings)
    with pytest.raises(InvalidRequest) as refused:
        catalog.validate({"query": "q", "platform": "builtin"})
    [problem] = refused.value.problems
    assert problem.field == "platform"
    assert "FANFUSE_BUILTIN_API_KEY" in problem.problem
    assert "fallback 'perplexity'" in problem.problem
    assert "FANFUSE_PERPLEXITY_API_KEY" in problem.problem
