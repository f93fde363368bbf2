"""Per-query isolation and the cache through the embedded runtime (service, stage, SQLite)."""

from __future__ import annotations

from fanfuse.platforms import Registry
from fanfuse.platforms.contract import Capabilities
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.errors import ProviderError
from fanfuse.wire.models import CacheState, Hit, PlatformState, TaskStatus
from tests.support.fakes import FakePlatform, hits


def answers(query: str) -> list[Hit]:
    if "zz500" in query:
        raise ProviderError("web", "HTTP 500 after 3 attempts")
    return hits(query.replace(" ", "-"), 3)


async def test_one_failing_query_leaves_the_others_and_makes_the_search_partial(
    settings: Settings,
) -> None:
    web, docs = FakePlatform("web", answers), FakePlatform("docs")
    async with EmbeddedRuntime(settings, registry=Registry.of([web, docs])) as rt:
        view = await rt.search({"query": ["permittivity", "other zz500"]})
    assert view.status is TaskStatus.PARTIAL
    run = next(r for r in view.platform_runs if r.name == "web")
    assert run.state is PlatformState.SUCCEEDED
    assert [(f.query_index, f.query) for f in run.failed_queries] == [(1, "other zz500")]
    assert "HTTP 500" in run.failed_queries[0].error
    assert [h.query_index for h in run.results] == [0, 0, 0]
    first, second = view.results_by_query
    assert any("web" in r.platforms for r in first.results)
    assert [(f.platform, f.error) for f in second.failed] == [("web", run.failed_queries[0].error)]
    assert all("web" not in r.platforms for r in second.results)
    assert view.summary is not None and view.summary.failed_queries == 1
    assert "1 query failed on a platform" in view.summary.message


async def test_a_platform_whose_every_query_failed_fails(settings: Settings) -> None:
    web = FakePlatform("web", answers)
    async with EmbeddedRuntime(settings, registry=Registry.of([web])) as rt:
        view = await rt.search({"query": ["a zz500", "b zz500"]})
    assert view.status is TaskStatus.FAILED
    run = view.platform_runs[0]
    assert run.error == "web: HTTP 500 after 3 attempts"
    assert len(run.failed_queries) == 2


class Batched(FakePlatform):
    """Takes every query in one call, as Perplexity does; the batch fails if any query does."""

    capabilities = Capabilities(multi_query=True)


async def test_a_failed_batch_is_asked_again_query_by_query(settings: Settings) -> None:
    web = Batched("web", answers)
    async with EmbeddedRuntime(settings, registry=Registry.of([web])) as rt:
        view = await rt.search({"query": ["permittivity", "other zz500", "third"]})
    assert view.status is TaskStatus.PARTIAL
    assert web.calls == 1 + 3
    run = view.platform_runs[0]
    assert [f.query_index for f in run.failed_queries] == [1]
    assert sorted({h.query_index for h in run.results}) == [0, 2]


async def test_a_repeated_search_is_answered_from_the_cache(settings: Settings) -> None:
    web = FakePlatform("web", answers)
    async with EmbeddedRuntime(settings, registry=Registry.of([web])) as rt:
        first = await rt.search({"query": "permittivity"})
        second = await rt.search({"query": "permittivity", "max_results": 3})
        bigger = await rt.search({"query": "permittivity", "max_results": 20})
        bypass = await rt.search({"query": "permittivity", "cache": "bypass"})
    assert web.calls == 3  # first, the larger request, the bypass
    assert first.platform_runs[0].cache is not None
    assert first.platform_runs[0].cache.state is CacheState.MISS
    note = second.platform_runs[0].cache
    assert note is not None and note.state is CacheState.HIT and note.age_s is not None
    assert [r.url for r in second.results] == [r.url for r in first.results]
    assert second.platform_runs[0].calls == []
    for missed in (bigger, bypass):
        note = missed.platform_runs[0].cache
        assert note is not None and note.state is CacheState.MISS


async def test_only_answers_from_the_cache_and_a_miss_fails_as_not_cached(
    settings: Settings,
) -> None:
    web = FakePlatform("web", answers)
    async with EmbeddedRuntime(settings, registry=Registry.of([web])) as rt:
        await rt.search({"query": "seen"})
        mixed = await rt.search({"query": ["seen", "unseen"], "cache": "only"})
        miss = await rt.search({"query": "unseen", "cache": "only"})
    assert web.calls == 1
    assert mixed.status is TaskStatus.PARTIAL
    run = mixed.platform_runs[0]
    assert run.cache is not None and run.cache.state is CacheState.PARTIAL
    assert [(f.query, f.error) for f in run.failed_queries] == [("unseen", "not cached")]
    assert miss.status is TaskStatus.FAILED
    assert miss.platform_runs[0].error == "web: not cached"


async def test_failures_are_never_cached(settings: Settings) -> None:
    web = FakePlatform("web", answers)
    async with EmbeddedRuntime(settings, registry=Registry.of([web])) as rt:
        await rt.search({"query": ["ok", "x zz500"]})
        again = await rt.search({"query": ["ok", "x zz500"]})
    run = again.platform_runs[0]
    assert run.cache is not None and run.cache.state is CacheState.PARTIAL
    assert run.cache.hits == 1 and run.cache.misses == 1
    assert web.calls == 2 + 1  # two queries, then only the failed one again


async def test_a_platform_ttl_of_zero_turns_its_cache_off(settings: Settings) -> None:
    web = FakePlatform("web", answers, overrides={"cache_ttl": 0})
    async with EmbeddedRuntime(settings, registry=Registry.of([web])) as rt:
        await rt.search({"query": "q"})
        await rt.search({"query": "q"})
    assert web.calls == 2
