"""What each adapter does beyond the shared contract: paging, shapes, key errors, blocks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.net.runner import RequestSpec, Runner
from fanfuse.platforms.contract import SearchParams
from fanfuse.wire.errors import Blocked, ProviderError
from tests.support.platforms import cases
from tests.support.platforms.harness import answer, fixture, run_search


def json_body(spec: RequestSpec) -> dict[str, Any]:
    """The request's JSON object, indexed as the provider reads it."""
    assert isinstance(spec.json, dict)
    return spec.json


pytestmark = pytest.mark.timeout(60)


def base(server: HTTPServer) -> str:
    return server.url_for("/").rstrip("/")


async def test_google_pages_past_ten_with_start_and_hides_the_key(
    server: HTTPServer, runner: Runner
) -> None:
    def page(request: Request) -> Response:
        start, num = int(request.args["start"]), int(request.args["num"])
        items = [
            {"title": f"r{i}", "link": f"https://example.org/{i}", "snippet": "s"}
            for i in range(start, start + num)
        ]
        body = {"items": items, "queries": {"nextPage": [{"startIndex": start + num}]}}
        return Response(json.dumps(body), content_type="application/json")

    server.expect_request("/customsearch/v1").respond_with_handler(page)
    lists, info = await run_search(cases._google(base(server)), runner, ["q"], limit=15)
    assert [h.url for h in lists[0]] == [f"https://example.org/{i}" for i in range(1, 16)]
    asked = [(r.args["start"], r.args["num"]) for r, _ in server.log]
    assert asked == [("1", "10"), ("11", "5")]
    assert all("test-key" not in str(c.url) and "key=***&" in str(c.url) for c in info.calls)


async def test_google_bad_key_is_a_400_named_as_such(server: HTTPServer, runner: Runner) -> None:
    server.expect_request("/customsearch/v1").respond_with_data(
        fixture("google/bad_key.json"), status=400, content_type="application/json"
    )
    with pytest.raises(ProviderError) as err:
        await run_search(cases._google(base(server)), runner, ["q"])
    assert "credentials rejected (check FANFUSE_GOOGLE_API_KEY)" in err.value.message
    assert "API key not valid" in err.value.message and len(server.log) == 1


async def test_perplexity_sends_queries_in_one_call_and_reads_grouped_results(
    server: HTTPServer, runner: Runner
) -> None:
    server.expect_request("/search", method="POST").respond_with_data(
        fixture("perplexity/grouped.json"), content_type="application/json"
    )
    lists, _ = await run_search(
        cases._perplexity(base(server)), runner, ["rust async", "python async"], limit=5
    )
    assert [h.url for h in lists[0]] == ["https://tokio.rs/"]
    assert lists[1][0].url == "https://docs.python.org/3/library/asyncio.html"
    sent = json.loads(server.log[0][0].get_data())
    assert sent["query"] == ["rust async", "python async"] and sent["max_results"] == 5
    assert server.log[0][0].headers["Authorization"] == "Bearer pplx-test"


async def test_perplexity_flat_results_answer_the_whole_batch(
    server: HTTPServer, runner: Runner
) -> None:
    server.expect_request("/search", method="POST").respond_with_data(
        fixture("perplexity/results.json"), content_type="application/json"
    )
    lists, _ = await run_search(cases._perplexity(base(server)), runner, ["a", "b"])
    assert len(lists) == 2 and len(lists[0]) == len(lists[1]) == 3
    assert lists[1][0].metadata["attribution"] == "batch"


async def test_brave_422_token_invalid_is_a_key_error(server: HTTPServer, runner: Runner) -> None:
    body = {"error": {"code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "The token is invalid"}}
    server.expect_request("/res/v1/web/search").respond_with_json(body, status=422)
    with pytest.raises(ProviderError) as err:
        await run_search(cases._brave(base(server)), runner, ["q"])
    assert "FANFUSE_BRAVE_API_KEY" in err.value.message and len(server.log) == 1


async def test_brave_strips_highlight_html(server: HTTPServer, runner: Runner) -> None:
    server.expect_request("/res/v1/web/search").respond_with_data(
        fixture("brave/results.json"), content_type="application/json"
    )
    lists, _ = await run_search(cases._brave(base(server)), runner, ["q"], limit=3)
    assert lists[0][0].title == "Tokio - An asynchronous Rust runtime"
    assert "<strong>" not in lists[0][0].snippet
    assert server.log[0][0].headers["X-Subscription-Token"] == "brave-test"


def test_wikipedia_language_picks_the_wiki_and_snippets_lose_their_html() -> None:
    from fanfuse.platforms.wikipedia import WikipediaPlatform

    platform = WikipediaPlatform(overrides={"user_agent": "t (t@example.org)"})
    params = SearchParams(queries=["Tokio"], limit=3, language="de-DE")
    settings = platform.settings_for(params, platform.load_settings())
    spec = platform.build_request(["Tokio"], params, None, settings)
    assert spec.url == "https://de.wikipedia.org/w/api.php"
    assert spec.headers["User-Agent"] == "t (t@example.org)"
    page = platform.parse_response(answer(params, settings, fixture("wikipedia/results.json")))
    assert page.hits[0].url == "https://de.wikipedia.org/wiki/Tokio_(software)"
    assert page.hits[0].snippet == "Tokio is an asynchronous runtime for Rust & more"
    assert page.next_page == 3


async def test_sec_edgar_sends_the_required_user_agent(server: HTTPServer, runner: Runner) -> None:
    server.expect_request("/LATEST/search-index").respond_with_data(
        fixture("sec_edgar/results.json"), content_type="application/json"
    )
    lists, _ = await run_search(cases._sec_edgar(base(server)), runner, ["climate risk"])
    assert server.log[0][0].headers["User-Agent"] == "fanfuse tests tests@example.com"
    hit = lists[0][0]
    assert hit.title == "Apple Inc.  (AAPL)  (CIK 0000320193): 10-K (2024-11-01)"
    assert hit.metadata["filing_index"].endswith(
        "/000032019324000123/0000320193-24-000123-index.htm"
    )


def test_sec_edgar_without_a_contact_is_unavailable() -> None:
    from fanfuse.platforms.sec_edgar import SecEdgarPlatform

    reason = SecEdgarPlatform(overrides={"user_agent": "no contact"}).availability()
    assert reason is not None and "FANFUSE_SEC_EDGAR_USER_AGENT" in reason


async def test_arxiv_error_feed_is_a_clear_error(server: HTTPServer, runner: Runner) -> None:
    feed = (
        b'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><entry>'
        b"<id>http://arxiv.org/api/errors#incorrect_id_format_for_1234</id><title>Error</title>"
        b"<summary>incorrect id format for 1234</summary></entry></feed>"
    )
    server.expect_request("/api/query").respond_with_data(feed, content_type="application/atom+xml")
    with pytest.raises(ProviderError) as err:
        await run_search(cases._arxiv(base(server)), runner, ["q"])
    assert "query rejected: incorrect id format" in err.value.message


async def test_tavily_raw_content_only_when_content_is_wanted(
    server: HTTPServer, runner: Runner
) -> None:
    data = json.loads(fixture("tavily/results.json"))
    data["results"][0]["raw_content"] = "Full page text of Tokio."
    server.expect_request("/search", method="POST").respond_with_json(data)
    platform = cases._tavily(base(server))
    plain, _ = await run_search(platform, runner, ["q"], limit=3)
    assert plain[0][0].content is None
    assert "include_raw_content" not in json.loads(server.log[0][0].get_data())


async def test_weixin_antispider_redirect_is_blocked(server: HTTPServer, runner: Runner) -> None:
    """Blocked, not a plain error: the platform's breaker opens for an hour on it."""
    server.expect_request("/weixin").respond_with_response(
        Response(status=302, headers={"Location": "http://weixin.sogou.com/antispider/?from=x"})
    )
    with pytest.raises(Blocked) as err:
        await run_search(cases._weixin(base(server)), runner, ["注意力"])
    assert "anti-spider" in err.value.message
    assert len(server.log) == 1


async def test_weixin_parses_articles(server: HTTPServer, runner: Runner) -> None:
    server.expect_request("/weixin").respond_with_data(
        fixture("weixin/results.html"), content_type="text/html; charset=utf-8"
    )
    lists, _ = await run_search(cases._weixin(base(server), max_pages=1), runner, ["注意力"])
    first, second = lists[0]
    assert first.title == "注意力机制详解：从Transformer说起"  # noqa: RUF001
    assert first.metadata["account"] == "机器之心" and second.metadata["account"] == "量子位"
    assert first.published_at is not None and first.published_at.year == 2024
    assert second.published_at is not None and second.published_at.year == 2023
    assert server.log[0][0].args["type"] == "2" and server.log[0][0].args["query"] == "注意力"


def test_weixin_reads_the_real_article_url_from_the_link_page() -> None:
    from fanfuse.platforms.weixin import WeixinPlatform

    target = WeixinPlatform().resolve_target("https://weixin.sogou.com/link?url=x", fixture(
        "weixin/link.html"
    ))  # fmt: skip
    assert target == (
        "https://mp.weixin.qq.com/s?src=11&timestamp=1717171717&ver=5290&signature=Zr*q6tTgH"
        "HsTHmnFeVHSHnB1eKd4wf7M-c0sKkW1vM&new=1"
    )
    assert WeixinPlatform().resolve_target("x", b"url += 'https://evil.example/';") is None


def test_builtin_reads_glm_web_search_sources() -> None:
    from fanfuse.platforms.builtin import BuiltinPlatform

    platform = BuiltinPlatform(
        overrides={"api_key": "k", "base_url": "https://open.bigmodel.cn/api/paas/v4"}
    )
    settings = platform.load_settings()
    params = SearchParams(queries=["q"], limit=5)
    body = json_body(platform.build_request(["q"], params, None, settings))
    assert body["tools"][0]["type"] == "web_search" and "enable_search" not in body
    page = platform.parse_response(answer(params, settings, fixture("builtin/glm.json")))
    assert [h.url for h in page.hits] == [
        "https://tokio.rs/",
        "https://rust-lang.github.io/async-book/",
    ]
    assert page.hits[0].metadata["provider"] == "glm"
    assert page.hits[0].metadata["answer"].startswith("Tokio是Rust")


def test_builtin_qwen_request_enables_search_and_keeps_the_answer() -> None:
    from fanfuse.platforms.builtin import BuiltinPlatform

    platform = BuiltinPlatform(overrides={"api_key": "k"})
    settings = platform.load_settings()
    params = SearchParams(queries=["q"], limit=5)
    body = json_body(platform.build_request(["q"], params, None, settings))
    assert body["enable_search"] is True
    assert body["search_options"]["enable_source"] is True
    page = platform.parse_response(answer(params, settings, fixture("builtin/qwen.json")))
    assert page.hits[1].snippet == "The async book explains the underlying model"
    assert page.hits[0].metadata["answer"].startswith("Tokio is the most widely used")
