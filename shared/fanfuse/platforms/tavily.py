"""`tavily`: the Tavily Search API.

Written from Tavily's API reference (docs.tavily.com/api-reference, "Tavily Search",
`POST https://api.tavily.com/search`): bearer key (`tvly-...`); body `{query, search_depth,
topic, max_results (<=20), time_range, include_domains, exclude_domains, include_raw_content,
country}`; answer `results[]` of `{title, url, content, score, raw_content, published_date}`
plus `answer` and `response_time`. When the search wants page content it asks for
`include_raw_content`, so the fetching stage has nothing left to fetch for those hits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import SecretStr
from pydantic_settings import SettingsConfigDict

from fanfuse.models import Hit
from fanfuse.platforms.base import Capabilities, SearchParams
from fanfuse.platforms.http import (
    HttpPlatform,
    HttpSettings,
    Page,
    PageToken,
    as_float,
    as_str,
    bearer,
    json_items,
    load_json,
    parse_date,
    require,
)
from fanfuse.platforms.runner import RequestSpec

MAX_RESULTS = 20


class TavilySettings(HttpSettings):
    model_config = SettingsConfigDict(env_prefix="FANFUSE_TAVILY_", extra="ignore", env_file=None)

    api_key: SecretStr
    base_url: str = "https://api.tavily.com"
    search_depth: str = "basic"
    topic: str = "general"
    time_range: str | None = None
    country: str | None = None
    include_domains: list[str] | None = None
    exclude_domains: list[str] | None = None


class TavilyPlatform(HttpPlatform):
    name = "tavily"
    description = "Tavily Search API (LLM-oriented web search, optional raw page content)"
    settings_model = TavilySettings
    capabilities = Capabilities(max_results_per_call=MAX_RESULTS)
    key_fields = ("api_key",)

    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: Any
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
            url=f"{settings.base_url.rstrip('/')}/search",
            method="POST",
            json=body,
            headers=bearer(settings.api_key),
        )

    def parse_response(
        self, status: int, headers: Mapping[str, str], body: bytes, queries: list[str],
        page: PageToken, settings: Any,
    ) -> Page:  # fmt: skip
        data = require(self.name, load_json(self.name, body), dict, "the body")
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
        info = {k: data[k] for k in ("answer", "response_time") if data.get(k)}
        return Page(hits=hits, info=info)
