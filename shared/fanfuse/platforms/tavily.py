"""`tavily`: the Tavily Search API.

Written from Tavily's API reference (docs.tavily.com/api-reference, "Tavily Search",
`POST https://api.tavily.com/search`): bearer key (`tvly-...`); body `{query, search_depth,
topic, max_results (<=20), time_range, include_domains, exclude_domains, include_raw_content,
country}`; answer `results[]` of `{title, url, content, score, raw_content, published_date}`
plus `answer` and `response_time`. When the search wants page content it asks for
`include_raw_content`, so the fetching stage has nothing left to fetch for those hits.
"""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr

from fanfuse.models import Hit
from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.base import SearchParams
from fanfuse.platforms.http import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.parsing import (
    as_float,
    as_str,
    bearer,
    json_items,
    load_json,
    parse_date,
    require,
)

MAX_RESULTS = 20


class TavilySettings(HttpSettings):
    api_key: SecretStr
    base_url: str = "https://api.tavily.com"
    search_depth: str = "basic"
    topic: str = "general"
    time_range: str | None = None
    country: str | None = None
    include_domains: list[str] | None = None
    exclude_domains: list[str] | None = None


class TavilyPlatform(HttpPlatform[TavilySettings]):
    name = "tavily"
    description = "Tavily Search API (LLM-oriented web search, optional raw page content)"
    settings_model = TavilySettings
    endpoint = "/search"
    key_fields = ("api_key",)

    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: TavilySettings
    ) -> RequestSpec:
        body: dict[str, Any] = {
            "query": queries[0],
            "max_results": max(1, min(params.limit, MAX_RESULTS)),
            "search_depth": settings.search_depth,
            "topic": settings.topic,
        }
        if params.include_content:
            body["include_raw_content"] = True
        for key in ("time_range", "country", "include_domains", "exclude_domains"):
            if getattr(settings, key):
                body[key] = getattr(settings, key)
        return RequestSpec(
            url=self.url(settings),
            method="POST",
            json=body,
            headers=bearer(settings.api_key),
        )

    def parse_response(self, resp: ProviderResponse[TavilySettings]) -> Page:
        data = require(self.name, load_json(self.name, resp.body), dict, "the body")
        hits = [
            Hit(
                title=as_str(item.get("title")),
                url=item["url"],
                snippet=as_str(item.get("content")),
                content=item.get("raw_content") or None,
                score=as_float(item.get("score")),
                published_at=parse_date(item.get("published_date")),
            )
            for item in json_items(self.name, data, "results")
        ]
        return Page(hits=hits)
