"""The post-filter behind every adapter whose provider lacks a parameter, end to end.

Each case runs one real adapter through the embedded runtime (service, searching stage, store)
against a 127.0.0.1 server that answers in the provider's documented format with a small world:
results inside and outside the included domains, inside an excluded subdomain, recent and old.
The search asks for the options the provider cannot apply itself; what comes back must be what
the options allow, and the platform document must say, per option, `post_filter` with the count
removed, or `not_applied` for country and safe search.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.net.runner import Runner
from fanfuse.platforms import Registry
from fanfuse.platforms.contract import Platform
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.models import PlatformState, TaskStatus
from tests.support.platforms import cases
from tests.support.platforms.harness import fixture

pytestmark = pytest.mark.timeout(60)


@dataclass
class Item:
    title: str
    url: str
    age_days: float = 1.0

    @property
    def when(self) -> datetime:
        return datetime.now(UTC) - timedelta(days=self.age_days)


IN = Item("in", "https://docs.example.org/in")
OUTSIDE = Item("outside", "https://news.example.net/outside")
EXCLUDED = Item("excluded", "https://spam.example.org/excluded")
OLD = Item("old", "https://docs.example.org/old", age_days=400)
DOMAINS = {"include_domains": ["example.org"], "exclude_domains": ["spam.example.org"]}
DOMAINS_REMOVED = {"include_domains": ("post_filter", 1), "exclude_domains": ("post_filter", 1)}
UNCHECKABLE = {"country": "DE", "safesearch": "strict"}
NOT_APPLIED = {"country": ("not_applied", 0), "safesearch": ("not_applied", 0)}

Body = Callable[[list[Item]], bytes]


def as_json(data: Any) -> bytes:
    return json.dumps(data).encode()


def google(items: list[Item]) -> bytes:
    return as_json(
        {"items": [{"title": i.title, "link": i.url, "snippet": "s"} for i in items], "queries": {}}
    )


def brave(items: list[Item]) -> bytes:
    results = [
        {"title": i.title, "url": i.url, "description": "d", "page_age": i.when.isoformat()}
        for i in items
    ]
    return as_json({"query": {"more_results_available": False}, "web": {"results": results}})


def searxng(items: list[Item]) -> bytes:
    results = [
        {"title": i.title, "url": i.url, "content": "c", "engine": "e", "publishedDate": None}
        for i in items
    ]
    return as_json({"results": results})


def perplexity(items: list[Item]) -> bytes:
    results = [
        {"title": i.title, "url": i.url, "snippet": "s", "date": f"{i.when:%Y-%m-%d}"}
        for i in items
    ]
    return as_json({"id": "r", "results": results})


def tavily(items: list[Item]) -> bytes:
    results = [{"title": i.title, "url": i.url, "content": "c", "score": 0.5} for i in items]
    return as_json({"query": "q", "results": results, "response_time": 0.1})


def exa(items: list[Item]) -> bytes:
    return as_json({"results": [{"id": i.url, "title": i.title, "url": i.url} for i in items]})


def linkup(items: list[Item]) -> bytes:
    results = [{"type": "text", "name": i.title, "url": i.url, "content": "c"} for i in items]
    return as_json({"results": results})


def arxiv(items: list[Item]) -> bytes:
    entries = "".join(
        f"<entry><id>{i.url}</id><title>{i.title}</title><summary>s</summary>"
        f"<published>{i.when:%Y-%m-%dT%H:%M:%SZ}</published>"
        f'<link href="{i.url}" rel="alternate" type="text/html"/></entry>'
        for i in items
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?><feed xmlns="http://www.w3.org/2005/Atom" '
        'xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">'
        f"<opensearch:totalResults>{len(items)}</opensearch:totalResults>{entries}</feed>"
    ).encode()


def wikipedia(items: list[Item]) -> bytes:
    found = [
        {"title": i.title, "pageid": n, "snippet": "s", "timestamp": f"{i.when:%Y-%m-%dT%H:%M:%SZ}"}
        for n, i in enumerate(items, 1)
    ]
    return as_json({"batchcomplete": True, "query": {"search": found}})


def sec_edgar(items: list[Item]) -> bytes:
    hits = [
        {
            "_id": f"0000000001-25-00000{n}:doc{n}.htm",
            "_source": {
                "ciks": ["0000000001"],
                "display_names": [i.title],
                "form": "",
                "file_date": f"{i.when:%Y-%m-%d}",
                "adsh": f"0000000001-25-00000{n}",
            },
        }
        for n, i in enumerate(items, 1)
    ]
    return as_json({"hits": {"total": {"value": len(hits)}, "hits": hits}})


def weixin(items: list[Item]) -> bytes:
    rows = "".join(
        f'<li><div class="txt-box"><h3><a href="/link?url=a{n}&amp;type=2">{i.title}</a></h3>'
        f'<p class="txt-info">s</p><div class="s-p" t="{int(i.when.timestamp())}"></div></div></li>'
        for n, i in enumerate(items, 1)
    )
    return f'<html><body><ul class="news-list">{rows}</ul></body></html>'.encode()


def qwen(items: list[Item]) -> bytes:
    sources = [{"index": n, "title": i.title, "url": i.url} for n, i in enumerate(items, 1)]
    return as_json(
        {
            "choices": [{"message": {"role": "assistant", "content": "An answer [1]."}}],
            "search_info": {"search_results": sources},
            "model": "qwen-plus",
        }
    )


@dataclass
class World:
    id: str
    make: Callable[..., Platform[Any]]
    path: str
    body: Body
    items: list[Item]
    options: dict[str, Any]
    kept: list[str]
    record: dict[str, tuple[str, int]]
    method: str = "GET"
    content_type: str = "application/json"
    sent: dict[str, str] = field(default_factory=dict)
    """Query parameters the provider must have been sent."""


WORLDS = [
    World("google-several-domains", cases._google, "/customsearch/v1", google,
          [IN, Item("net", "https://news.example.net/net"), Item("com", "https://example.com/x")],
          {"include_domains": ["example.org", "example.net"]}, ["in", "net"],
          {"include_domains": ("post_filter", 1)}),
    World("brave", cases._brave, "/res/v1/web/search", brave, [IN, OUTSIDE, EXCLUDED],
          DOMAINS, ["in"], DOMAINS_REMOVED),
    World("searxng", cases._searxng, "/search", searxng, [IN, OUTSIDE, EXCLUDED],
          {**DOMAINS, "country": "DE"}, ["in"],
          {**DOMAINS_REMOVED, "country": ("not_applied", 0)}),
    World("perplexity-exclusion-beside-an-allowlist", cases._perplexity, "/search", perplexity,
          [IN, EXCLUDED], {**DOMAINS, "safesearch": "strict"}, ["in"],
          {"include_domains": ("native", 0), "exclude_domains": ("post_filter", 1),
           "safesearch": ("not_applied", 0)}, method="POST"),
    World("tavily", cases._tavily, "/search", tavily, [IN], {"safesearch": "strict"}, ["in"],
          {"safesearch": ("not_applied", 0)}, method="POST"),
    World("exa", cases._exa, "/search", exa, [IN], {"safesearch": "off"}, ["in"],
          {"safesearch": ("not_applied", 0)}, method="POST"),
    World("linkup", cases._linkup, "/v1/search", linkup, [IN], UNCHECKABLE, ["in"], NOT_APPLIED,
          method="POST"),
    World("arxiv", cases._arxiv, "/api/query", arxiv,
          [Item("paper one", "http://arxiv.org/abs/2501.00001v1"),
           Item("paper two", "http://arxiv.org/abs/2501.00002v1")],
          {"exclude_domains": ["arxiv.org"], **UNCHECKABLE}, [],
          {"exclude_domains": ("post_filter", 2), **NOT_APPLIED},
          content_type="application/atom+xml"),
    World("wikipedia", cases._wikipedia, "/w/api.php", wikipedia,
          [Item("Recent", ""), Item("Stale", "", age_days=400)],
          {"time_range": "week", **UNCHECKABLE}, ["Recent"],
          {"time_range": ("post_filter", 1), **NOT_APPLIED}),
    World("sec_edgar", cases._sec_edgar, "/LATEST/search-index", sec_edgar,
          [Item("Acme Corp", ""), Item("Globex Inc", "")],
          {"exclude_domains": ["sec.gov"], **UNCHECKABLE}, [],
          {"exclude_domains": ("post_filter", 2), **NOT_APPLIED}),
    World("weixin", cases._weixin, "/weixin", weixin,
          [Item("new article", ""), Item("old article", "", age_days=40)],
          {"time_range": "month", **UNCHECKABLE}, ["new article"],
          {"time_range": ("post_filter", 1), **NOT_APPLIED},
          content_type="text/html; charset=utf-8", sent={"tsn": "3"}),
    World("builtin-qwen", cases._builtin, "/compatible-mode/v1/chat/completions", qwen,
          [IN, EXCLUDED], {"exclude_domains": ["spam.example.org"], "time_range": "day",
                           **UNCHECKABLE}, ["in"],
          {"exclude_domains": ("post_filter", 1), "time_range": ("post_filter", 0),
           **NOT_APPLIED}, method="POST"),
]  # fmt: skip


@pytest.mark.parametrize("world", WORLDS, ids=lambda w: w.id)
async def test_options_the_provider_lacks_are_post_filtered_or_recorded(
    world: World, server: HTTPServer, runner: Runner, settings: Settings
) -> None:
    def answer(request: Request) -> Response:
        return Response(world.body(world.items), content_type=world.content_type)

    server.expect_request(world.path, method=world.method).respond_with_handler(answer)
    platform = world.make(server.url_for("/").rstrip("/"))
    request = {"query": "rust async", "platform": platform.name, **world.options}
    async with EmbeddedRuntime(settings, registry=Registry.of([platform]), runner=runner) as rt:
        view = await rt.search(request)
    run = view.platform_runs[0]
    assert run.state is PlatformState.SUCCEEDED, run.error
    assert view.status is TaskStatus.COMPLETED
    assert sorted(r.title for r in view.results) == sorted(world.kept)
    assert {k: (u.applied.value, u.removed) for k, u in run.options.items()} == world.record
    asked = server.log[0][0].args
    assert {k: asked.get(k) for k in world.sent} == world.sent
    assert all(r.remote_addr == "127.0.0.1" for r, _ in server.log)


async def test_google_sends_no_site_search_for_several_domains(
    server: HTTPServer, runner: Runner, settings: Settings
) -> None:
    """Two included domains do not fit `siteSearch`: nothing is sent, everything post-filtered."""
    server.expect_request("/customsearch/v1").respond_with_data(
        google([IN, OUTSIDE]), content_type="application/json"
    )
    platform = cases._google(server.url_for("/").rstrip("/"))
    request = {"query": "q", "platform": "google", "include_domains": ["example.org", "x.io"]}
    async with EmbeddedRuntime(settings, registry=Registry.of([platform]), runner=runner) as rt:
        view = await rt.search(request)
    assert [r.title for r in view.results] == ["in"]
    args = server.log[0][0].args
    assert "siteSearch" not in args and "siteSearchFilter" not in args and args["q"] == "q"


@pytest.mark.parametrize(
    ("options", "kept", "record"),
    [
        ({"include_domains": ["weixin.qq.com"]}, 2, {"include_domains": ("post_filter", 0)}),
        ({"exclude_domains": ["qq.com"]}, 0, {"exclude_domains": ("post_filter", 2)}),
    ],
)
async def test_weixin_is_filtered_by_domain_after_its_links_are_resolved(
    options: dict[str, Any],
    kept: int,
    record: dict[str, tuple[str, int]],
    server: HTTPServer,
    runner: Runner,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sogou's result links are `/link?url=` redirects: filtered on them, `weixin.qq.com` would
    match nothing. The domains are checked on the article URLs the resolving stage finds."""
    monkeypatch.setenv("FANFUSE_CONTENT_ALLOW_LOOPBACK", "true")
    settings.content = Settings().content  # the tree reads its sections when it is built
    items = [Item("first article", ""), Item("second article", "")]
    server.expect_request("/weixin").respond_with_data(
        weixin(items), content_type="text/html; charset=utf-8"
    )
    server.expect_request("/link").respond_with_data(
        fixture("weixin/link.html"), content_type="text/html; charset=utf-8"
    )
    platform = cases._weixin(server.url_for("/").rstrip("/"))
    request = {"query": "q", "platform": platform.name, **options}
    async with EmbeddedRuntime(settings, registry=Registry.of([platform]), runner=runner) as rt:
        view = await rt.search(request)
    run = view.platform_runs[0]
    assert run.state is PlatformState.SUCCEEDED, run.error
    assert len(run.results) == kept  # (both links lead to the fixture's one article)
    assert all(h.url.startswith("https://mp.weixin.qq.com/") for h in run.results)
    assert [h.rank for h in run.results] == list(range(1, kept + 1))
    assert {k: (u.applied.value, u.removed) for k, u in run.options.items()} == record
