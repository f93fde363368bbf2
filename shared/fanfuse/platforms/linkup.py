"""`linkup`: the Linkup search API, `searchResults` output.

Written from Linkup's documentation (docs.linkup.so, "Concepts" and the `/search` endpoint
reference): `POST https://api.linkup.so/v1/search` with a bearer key and body
`{q, depth: "fast"|"standard"|"deep", outputType: "searchResults", maxResults, includeDomains,
excludeDomains, fromDate, toDate}`; answer `results[]` of `{type: "text", name, url, content}`.
The `content` is text from the page, so it serves as the snippet and, when asked, the content.

Request options, from the same reference and Linkup's "Filtering" and "Date filtering" pages:
`includeDomains` / `excludeDomains` (arrays of domains; with both, only included URLs come back)
and `fromDate` (ISO 8601 `YYYY-MM-DD`, here the day the range starts). Linkup has no country or
safe-search parameter. A request's domains override `FANFUSE_LINKUP_INCLUDE_DOMAINS` /
`_EXCLUDE_DOMAINS`.
"""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr

from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.contract import SearchParams
from fanfuse.platforms.http_api import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.native import domains, since
from fanfuse.platforms.parsing import as_str, bearer, json_items, load_json, require
from fanfuse.wire.cost import Price
from fanfuse.wire.models import Hit
from fanfuse.wire.options import OptionName

SNIPPET_CHARS = 400


class LinkupSettings(HttpSettings):
    api_key: SecretStr
    base_url: str = "https://api.linkup.so"
    depth: str = "standard"
    include_domains: list[str] | None = None
    exclude_domains: list[str] | None = None


class LinkupPlatform(HttpPlatform[LinkupSettings]):
    name = "linkup"
    description = "Linkup search API (searchResults output)"
    settings_model = LinkupSettings
    list_price = Price(per_request_usd=0.005)
    """`searchResults` at depth fast/standard: $0.005 a call; deep: $0.05 (`price`;
    docs/platforms.md)."""

    def price(self, settings: LinkupSettings | None) -> Price:
        if settings is not None and settings.depth == "deep":
            return Price(per_request_usd=0.05)
        return self.list_price

    endpoint = "/v1/search"
    key_fields = ("api_key",)
    native = frozenset(
        {OptionName.INCLUDE_DOMAINS, OptionName.EXCLUDE_DOMAINS, OptionName.TIME_RANGE}
    )

    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: LinkupSettings
    ) -> RequestSpec:
        body: dict[str, Any] = {
            "q": queries[0],
            "depth": settings.depth,
            "outputType": "searchResults",
            "maxResults": params.limit,
        }
        options = params.options
        include, exclude = domains(options, settings.include_domains, settings.exclude_domains)
        if include:
            body["includeDomains"] = include
        if exclude:
            body["excludeDomains"] = exclude
        start = since(params)
        if start is not None:
            body["fromDate"] = start.date().isoformat()
        return RequestSpec(
            url=self.url(settings),
            method="POST",
            json=body,
            headers=bearer(settings.api_key),
        )

    def parse_response(self, resp: ProviderResponse[LinkupSettings]) -> Page:
        data = require(self.name, load_json(self.name, resp.body), dict, "the body")
        hits = []
        for item in json_items(self.name, data, "results"):
            text = as_str(item.get("content")).strip()
            snippet = text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS].rsplit(" ", 1)[0]
            hits.append(
                Hit(
                    title=as_str(item.get("name")),
                    url=item["url"],
                    snippet=snippet,
                    content=text or None,
                    metadata={"type": item["type"]} if item.get("type") else {},
                )
            )
        return Page(hits=hits)
