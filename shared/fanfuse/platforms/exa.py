"""`exa`: the Exa search API.

Written from Exa's API reference (docs.exa.ai, "Search", `POST https://api.exa.ai/search`):
header `x-api-key`; body `{query, numResults (<=100), type: "auto"|"neural"|"keyword"|"fast",
includeDomains, excludeDomains, startPublishedDate, contents: {text, highlights}}`; answer
`results[]` of `{id, title, url, publishedDate, author, score, text, highlights}`. Page text is
requested only when the search wants content.
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
    json_items,
    load_json,
    parse_date,
    require,
    secret,
)
from fanfuse.platforms.runner import RequestSpec

MAX_RESULTS = 100


class ExaSettings(HttpSettings):
    model_config = SettingsConfigDict(env_prefix="FANFUSE_EXA_", extra="ignore", env_file=None)

    api_key: SecretStr
    base_url: str = "https://api.exa.ai"
    type: str = "auto"
    include_domains: list[str] | None = None
    exclude_domains: list[str] | None = None


class ExaPlatform(HttpPlatform):
    name = "exa"
    description = "Exa search API (neural and keyword web search)"
    settings_model = ExaSettings
    capabilities = Capabilities(max_results_per_call=MAX_RESULTS)
    key_fields = ("api_key",)

    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: Any
    ) -> RequestSpec:
        contents: dict[str, Any] = {"highlights": True}
        if params.include_content:
            contents["text"] = True
        body: dict[str, Any] = {
            "query": queries[0],
            "numResults": max(1, min(params.limit, MAX_RESULTS)),
            "type": settings.type,
            "contents": contents,
        }
        if settings.include_domains:
            body["includeDomains"] = settings.include_domains
        if settings.exclude_domains:
            body["excludeDomains"] = settings.exclude_domains
        return RequestSpec(
            url=f"{settings.base_url.rstrip('/')}/search",
            method="POST",
            json=body,
            headers={"x-api-key": secret(settings.api_key)},
        )

    def parse_response(
        self, status: int, headers: Mapping[str, str], body: bytes, queries: list[str],
        page: PageToken, settings: Any,
    ) -> Page:  # fmt: skip
        data = require(self.name, load_json(self.name, body), dict, "the body")
        hits = []
        for item in json_items(self.name, data, "results"):
            highlights = item.get("highlights")
            snippet = (
                " ... ".join(h for h in highlights if isinstance(h, str))
                if isinstance(highlights, list)
                else ""
            )
            text = as_str(item.get("text")).strip()
            hits.append(
                Hit(
                    title=as_str(item.get("title")),
                    url=item["url"],
                    snippet=snippet or text[:300],
                    content=text or None,
                    score=as_float(item.get("score")),
                    published_at=parse_date(item.get("publishedDate")),
                    metadata={k: item[k] for k in ("id", "author") if item.get(k)},
                )
            )
        return Page(hits=hits)
