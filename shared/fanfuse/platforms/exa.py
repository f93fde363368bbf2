"""`exa`: the Exa search API.

Written from Exa's API reference (docs.exa.ai, "Search", `POST https://api.exa.ai/search`):
header `x-api-key`; body `{query, numResults (<=100), type: "auto"|"neural"|"keyword"|"fast",
includeDomains, excludeDomains, startPublishedDate, contents: {text, highlights}}`; answer
`results[]` of `{id, title, url, publishedDate, author, score, text, highlights}`. Page text is
requested only when the search wants content.

Request options, from the same reference: `includeDomains` and `excludeDomains` (both may be
given), `startPublishedDate` in ISO 8601 (`2023-01-01T00:00:00.000Z`; here the search's time
minus the range), and `userLocation`, "the two-letter ISO country code of the user" (upper case
in the reference's example; added in Exa's changelog "Geolocation Filter Support", a bias, not a
filter). Exa's boolean `moderation` flag is not a safe-search level, so safe search is not
applied. A request's domains override `FANFUSE_EXA_INCLUDE_DOMAINS` / `_EXCLUDE_DOMAINS`.
"""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr

from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.contract import SearchParams
from fanfuse.platforms.http_api import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.native import domains, since
from fanfuse.platforms.parsing import (
    as_float,
    as_str,
    json_items,
    load_json,
    parse_date,
    require,
    secret,
)
from fanfuse.wire.cost import Price
from fanfuse.wire.models import Hit
from fanfuse.wire.options import OptionName

MAX_RESULTS = 100


class ExaSettings(HttpSettings):
    api_key: SecretStr
    base_url: str = "https://api.exa.ai"
    type: str = "auto"
    include_domains: list[str] | None = None
    exclude_domains: list[str] | None = None


class ExaPlatform(HttpPlatform[ExaSettings]):
    name = "exa"
    description = "Exa search API (neural and keyword web search)"
    settings_model = ExaSettings
    list_price = Price(per_request_usd=0.007, per_result_usd=0.001, included_results=10)
    """Search with contents: $7 per 1,000 requests with 10 results (text and highlights
    included), $1 per 1,000 results past 10; deep: $12, deep-reasoning: $15 per 1,000
    (`price`; docs/platforms.md)."""
    max_per_request = MAX_RESULTS

    def price(self, settings: ExaSettings | None) -> Price:
        tier = {"deep": 0.012, "deep-reasoning": 0.015}.get(settings.type if settings else "")
        if tier is None:
            return self.list_price
        return self.list_price.model_copy(update={"per_request_usd": tier})

    endpoint = "/search"
    key_fields = ("api_key",)
    native = frozenset(
        {
            OptionName.INCLUDE_DOMAINS,
            OptionName.EXCLUDE_DOMAINS,
            OptionName.TIME_RANGE,
            OptionName.COUNTRY,
        }
    )

    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: ExaSettings
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
        options = params.options
        include, exclude = domains(options, settings.include_domains, settings.exclude_domains)
        if include:
            body["includeDomains"] = include
        if exclude:
            body["excludeDomains"] = exclude
        start = since(params)
        if start is not None:
            body["startPublishedDate"] = start.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        if options.country:
            body["userLocation"] = options.country
        return RequestSpec(
            url=self.url(settings),
            method="POST",
            json=body,
            headers={"x-api-key": secret(settings.api_key)},
        )

    def parse_response(self, resp: ProviderResponse[ExaSettings]) -> Page:
        data = require(self.name, load_json(self.name, resp.body), dict, "the body")
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
