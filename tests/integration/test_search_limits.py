"""Per-search caps on provider calls and page fetches (limits.py), through the embedded runtime
against a SearXNG double on 127.0.0.1 whose results link to pages on the same server; and the
cache's scope per owner, as two callers of one service see it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.net.runner import Runner
from fanfuse.platforms import Registry
from fanfuse.platforms.searxng import SearxngPlatform
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.models import CacheState, Caller, PlatformRun, PlatformState

pytestmark = pytest.mark.timeout(120)

PER_PAGE = 20
PAGE = (
    "<html><body><article><p>" + "A paragraph about search. " * 20 + "</p></article></body></html>"
)


@pytest.fixture
def provider(server: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[HTTPServer]:
    """Every `/{name}/search` answers PER_PAGE results per page, each linking to a page here."""
    monkeypatch.setenv("FANFUSE_CONTENT_ALLOW_LOOPBACK", "true")
    monkeypatch.delenv("FANFUSE_CONTENT_LLM_BASE_URL", raising=False)

    def results(request: Request) -> Response:
        query, page = request.args["q"], int(request.args.get("pageno", 1))
        items = [
            {"title": f"{query} {page}.{i}", "url": server.url_for(f"/page/{query}/{page}/{i}")}
            for i in range(PER_PAGE)
        ]
        return Response(json.dumps({"results": items}), content_type="application/json")

    server.expect_request(re.compile(r"^/\w+/search$")).respond_with_handler(results)
    server.expect_request(re.compile("^/page/")).respond_with_data(PAGE, content_type="text/html")
    yield server


def platforms(server: HTTPServer, names: str) -> Registry:
    return Registry.of(
        [SearxngPlatform(name=n, overrides={"base_url": server.url_for(f"/{n}")}) for n in names]
    )


def sent(server: HTTPServer, prefix: str) -> int:
    return sum(1 for request, _ in server.log if request.path.startswith(prefix))


def by_name(runs: list[PlatformRun]) -> dict[str, PlatformRun]:
    return {r.name: r for r in runs}


async def test_provider_calls_are_capped_per_platform_share_and_reported(
    provider: HTTPServer, runner: Runner, settings: Settings
) -> None:
    """A cap of 4 calls on 2 platforms: 2 each. Three queries: the first two get their first
    page, the third is not asked (listed as a failed query), no second page is asked, and the
    cut is on each platform document. The caller's cap is not the provider's failure."""
    settings = settings.model_copy(update={"max_provider_calls_per_search": 4})
    async with EmbeddedRuntime(settings, registry=platforms(provider, "ab"), runner=runner) as rt:
        view = await rt.search(
            {"query": ["q0", "q1", "q2"], "platform": ["a", "b"], "max_results": 40}
        )
        health = rt.service.store.get_health()
    assert sent(provider, "/a/search") == 2 and sent(provider, "/b/search") == 2
    for run in view.platform_runs:
        assert run.state is PlatformState.SUCCEEDED
        assert {h.query_index for h in run.results} == {0, 1}
        [not_asked] = run.failed_queries
        assert not_asked.query == "q2" and "not asked" in not_asked.error
        cut = run.limits["provider_calls"]
        assert cut.cap == 2 and cut.used == 2 and cut.skipped >= 1
        assert "page_fetches" not in run.limits  # no content asked: nothing cut there
    assert all(h.consecutive_failures == 0 for h in health.values())


async def test_page_fetches_are_capped_best_ranked_first_and_reported(
    provider: HTTPServer, runner: Runner, settings: Settings
) -> None:
    """A cap of 6 page fetches on 2 platforms: 3 each, for 2 queries x 10 results: each query's
    first result, then the first query's second; the other 17 keep their snippet."""
    settings = settings.model_copy(update={"max_page_fetches_per_search": 6})
    async with EmbeddedRuntime(settings, registry=platforms(provider, "ab"), runner=runner) as rt:
        view = await rt.search(
            {
                "query": ["q0", "q1"],
                "platform": ["a", "b"],
                "max_results": 10,
                "include_content": True,
            }
        )
    assert sent(provider, "/page/") == 6
    for run in view.platform_runs:
        assert run.state is PlatformState.SUCCEEDED and len(run.results) == 20
        fetched = sorted((h.rank, h.query_index) for h in run.results if h.content_id)
        assert fetched == [(1, 0), (1, 1), (2, 0)]
        cut = run.limits["page_fetches"]
        assert (cut.cap, cut.used, cut.skipped) == (3, 3, 17)


async def test_a_deep_request_with_content_stays_within_the_default_caps(
    provider: HTTPServer, runner: Runner, settings: Settings
) -> None:
    """5 queries x depth 100 x content on one platform: 25 provider pages and, uncapped, 500
    page fetches; the default cap fetches its share and reports the rest."""
    defaults = Settings()
    async with EmbeddedRuntime(settings, registry=platforms(provider, "a"), runner=runner) as rt:
        view = await rt.search(
            {
                "query": [f"q{i}" for i in range(5)],
                "max_results": 100,
                "include_content": True,
            }
        )
    [run] = view.platform_runs
    hits = len(run.results)
    assert hits == 500 and run.state is PlatformState.SUCCEEDED
    assert sent(provider, "/a/search") == 25 <= defaults.max_provider_calls_per_search
    assert "provider_calls" not in run.limits
    assert sent(provider, "/page/") == defaults.max_page_fetches_per_search
    cut = run.limits["page_fetches"]
    assert cut.used == defaults.max_page_fetches_per_search
    assert cut.skipped == hits - defaults.max_page_fetches_per_search


@pytest.mark.parametrize(("scope", "served"), [("owner", False), ("shared", True)])
async def test_cache_only_does_not_tell_one_owner_what_another_searched(
    provider: HTTPServer, runner: Runner, settings: Settings, scope: str, served: bool
) -> None:
    settings = settings.model_copy(update={"cache_scope": scope})
    alice = Caller(subject="alice", via="api_key")
    bob = Caller(subject="bob", via="api_key")
    async with EmbeddedRuntime(settings, registry=platforms(provider, "a"), runner=runner) as rt:
        first = rt.service.start({"query": "secret plans"}, caller=alice)
        assert (await rt.wait(first.task_id)).status.value == "completed"
        asked = sent(provider, "/a/search")
        peek = rt.service.start({"query": "secret plans", "cache": "only"}, caller=bob)
        [bobs] = (await rt.wait(peek.task_id)).platform_runs
        again = rt.service.start({"query": "secret plans", "cache": "only"}, caller=alice)
        [alices] = (await rt.wait(again.task_id)).platform_runs
        health = rt.service.store.get_health().get("a")
    assert sent(provider, "/a/search") == asked  # `only` never asks the provider
    assert alices.state is PlatformState.SUCCEEDED and alices.cache is not None
    assert alices.cache.state is CacheState.HIT
    assert bobs.cache is not None
    if served:
        assert bobs.state is PlatformState.SUCCEEDED and bobs.cache.state is CacheState.HIT
    else:
        assert bobs.state is PlatformState.FAILED and bobs.results == []
        assert bobs.cache.state is CacheState.MISS and "not cached" in (bobs.error or "")
    assert health is None or health.consecutive_failures == 0  # a miss is not the provider's
