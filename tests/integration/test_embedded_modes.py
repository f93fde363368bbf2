"""Modes end to end on the embedded runtime: which platforms run, how deep, what is measured,
and the LLM reranker's wiring against an OpenAI-compatible double on 127.0.0.1.

The double ranks with a fixed scoring function (the number at the end of each title, highest
first), so the expected order is known and differs from the fused one.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.platforms import Registry
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.models import PlatformHealth, TaskStatus, utcnow
from tests.support.fakes import ContentFakePlatform, FakePlatform, hits
from tests.support.health_checks import put_health

TITLE = re.compile(r"^\[(\d+)\] .* (\d+)$", re.M)


def by_title_number(request: Request) -> Response:
    """A chat completion ranking the prompt's results by their titles' numbers, highest first."""
    body = json.loads(request.get_data())
    prompt = body["messages"][-1]["content"]
    found = [(int(i), int(n)) for i, n in TITLE.findall(prompt)]
    ranking = [i for i, _ in sorted(found, key=lambda item: -item[1])]
    answer = {
        "choices": [{"message": {"role": "assistant", "content": json.dumps({"ranking": ranking})}}]
    }
    return Response(json.dumps(answer), content_type="application/json")


@pytest.fixture
def llm(server: HTTPServer, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> HTTPServer:
    monkeypatch.setenv("FANFUSE_RERANK_LLM_BASE_URL", server.url_for("/v1"))
    monkeypatch.setenv("FANFUSE_RERANK_LLM_MODEL", "ranker-double")
    settings.rerank_llm = Settings().rerank_llm  # the tree reads its sections when it is built
    return server


async def test_fast_runs_the_two_quickest_platforms_by_what_was_measured(
    settings: Settings,
) -> None:
    names = ["a", "b", "c"]
    platforms = {n: FakePlatform(n) for n in names}
    async with EmbeddedRuntime(settings, registry=Registry.of(platforms.values())) as rt:
        now = utcnow() - timedelta(minutes=5)
        for name, seconds in {"a": 3.0, "b": 0.2, "c": 0.1}.items():
            put_health(
                rt.service.store,
                PlatformHealth(name=name, latency_s=seconds, samples=5, updated_at=now),
            )
        view = await rt.search({"query": "q", "mode": "fast"})
        assert view.status is TaskStatus.COMPLETED
        assert view.platforms == ["b", "c"]
        assert platforms["a"].calls == 0
        measured = rt.service.store.get_health()
    # The runs were folded into the estimates (written: the old ones were 5 minutes old).
    latency = measured["b"].latency_s
    assert measured["b"].samples == 6 and latency is not None and latency < 0.2
    assert measured["a"].samples == 5


async def test_a_cache_hit_is_not_a_latency_sample(settings: Settings) -> None:
    platform = FakePlatform("a")
    async with EmbeddedRuntime(settings, registry=Registry.of([platform])) as rt:
        await rt.search({"query": "q"})
        first = rt.service.store.get_health()["a"]
        stale = first.model_copy(update={"updated_at": utcnow() - timedelta(minutes=5)})
        put_health(rt.service.store, stale)
        view = await rt.search({"query": "q"})
        assert view.platform_runs[0].cache is not None
        assert view.platform_runs[0].cache.state == "hit"
        assert rt.service.store.get_health()["a"] == stale


async def test_comprehensive_asks_deeper_fetches_content_and_reranks_with_the_llm(
    settings: Settings, llm: HTTPServer
) -> None:
    llm.expect_request("/v1/chat/completions", method="POST").respond_with_handler(by_title_number)
    a = ContentFakePlatform("a", hits("a", 12))
    b = ContentFakePlatform("b", hits("b", 12))
    async with EmbeddedRuntime(settings, registry=Registry.of([a, b])) as rt:
        view = await rt.search({"query": "q", "mode": "comprehensive", "max_results": 4})
    assert view.status is TaskStatus.COMPLETED
    assert view.request.include_content is True
    assert a.params[0].limit == 50 and a.params[0].include_content is True
    assert view.rerank is not None
    assert (view.rerank.method, view.rerank.model, view.rerank.applied) == (
        "llm",
        "ranker-double",
        True,
    )
    assert view.rerank.candidates == 20  # the pool of 24 is cut to the 20 the LLM may see
    # The double ranks by title number: the 20 candidates hold a 1-10 and b 1-10.
    assert [r.title for r in view.results] == ["a 10", "b 10", "a 9", "b 9"]
    assert [r.rank for r in view.results] == [1, 2, 3, 4]
    sent = json.loads(llm.log[0][0].get_data())
    assert sent["model"] == "ranker-double" and sent["max_tokens"] == 16 + 4 * 20


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (500, "upstream exploded", "HTTP 500"),
        (200, '{"choices": [{"message": {"content": "no idea"}}]}', "no JSON in the answer"),
        (200, "<html>gateway</html>", "not a chat completion"),
    ],
)
async def test_any_llm_failure_keeps_the_fused_order_and_says_so(
    settings: Settings, llm: HTTPServer, status: int, body: str, reason: str
) -> None:
    llm.expect_request("/v1/chat/completions").respond_with_data(body, status=status)
    a, b = (ContentFakePlatform(n, hits(n, 6)) for n in "ab")
    registry = Registry.of([a, b])
    async with EmbeddedRuntime(settings, registry=registry) as rt:
        fused = await rt.search({"query": "q", "max_results": 4, "cache": "bypass"})
        view = await rt.search(
            {"query": "q", "mode": "comprehensive", "max_results": 4, "cache": "bypass"}
        )
    assert view.status is TaskStatus.COMPLETED
    assert [r.url for r in view.results] == [r.url for r in fused.results]
    assert view.rerank is not None and view.rerank.applied is False
    assert view.rerank.error is not None and reason in view.rerank.error


async def test_without_an_llm_comprehensive_keeps_the_fused_order_with_a_note(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FANFUSE_RERANK_LLM_BASE_URL", raising=False)
    registry = Registry.of([ContentFakePlatform("a"), ContentFakePlatform("b")])
    async with EmbeddedRuntime(settings, registry=registry) as rt:
        view = await rt.search({"query": "q", "mode": "comprehensive"})
    assert view.rerank is not None and view.rerank.applied is False
    assert view.rerank.error is not None and "no LLM endpoint" in view.rerank.error
