"""`perplexity`: the Perplexity Search API, up to 5 queries in one call.

Written from Perplexity's "Search API" quickstart and reference (docs.perplexity.ai, "Search
quickstart", `POST /search`): body `{query: string | string[<=5], max_results (1-20),
max_tokens_per_page, country, search_domain_filter, search_recency_filter,
search_language_filter}`, bearer key; answer `results[]` of `{title, url, snippet, date,
last_updated}`. With several queries the docs are ambiguous (the SDK types show one flat list, a
guide shows one list per query), so both shapes are accepted: grouped results are attributed to
their query; a flat list answers the batch as a whole and is given to every query.

Request options, from the `POST /search` reference and the SDK's request type
(`ApiSearchRequest`): `search_domain_filter` is one list of at most 20 domains, an allowlist, or
a denylist when every entry starts with `-`; Perplexity's domain-filter guide says the two are
never mixed in one request. So included domains go as the allowlist (and excluded ones are then
not native, only post-filtered); excluded domains alone go as the denylist.
`search_recency_filter` takes `day`/`week`/`month`/`year`; `country` the ISO 3166-1 alpha-2
code. There is no safe-search parameter. A request's domains replace the whole
`FANFUSE_PERPLEXITY_SEARCH_DOMAIN_FILTER`, its time range `_SEARCH_RECENCY_FILTER` and its
country `_COUNTRY`; those settings stay the defaults for requests that leave the option unset.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr

from fanfuse.net.policy import RateLimit, concurrency_for
from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.contract import Capabilities, SearchParams
from fanfuse.platforms.http_api import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.native import chosen
from fanfuse.platforms.parsing import as_str, bearer, load_json, parse_date, require
from fanfuse.wire.cost import Price
from fanfuse.wire.errors import ProviderError
from fanfuse.wire.models import Hit
from fanfuse.wire.options import OptionName, SearchOptions

MAX_QUERIES = 5
MAX_RESULTS = 20
MAX_DOMAIN_FILTER = 20


def domain_filter(options: SearchOptions) -> list[str] | None:
    """`search_domain_filter` for the request's domains: the allowlist when it includes some,
    else the `-` denylist; None when it sets neither or the list would pass Perplexity's cap."""
    if options.include_domains:
        entries = list(options.include_domains)
    else:
        entries = [f"-{domain}" for domain in options.exclude_domains]
    return entries if 0 < len(entries) <= MAX_DOMAIN_FILTER else None


TYPICAL_LATENCY_S = 8.0  # an LLM answers with citations: several seconds
RATE_LIMIT = RateLimit(
    "Perplexity Search API: about 3 requests a second (tier-based; unverified)", per_second=3.0
)


class PerplexitySettings(HttpSettings):
    max_concurrency: int = Field(default=concurrency_for(RATE_LIMIT, TYPICAL_LATENCY_S), ge=1)
    api_key: SecretStr
    base_url: str = "https://api.perplexity.ai"
    max_tokens_per_page: int | None = None
    country: str | None = None
    search_recency_filter: str | None = None
    search_domain_filter: list[str] | None = None


class PerplexityPlatform(HttpPlatform[PerplexitySettings]):
    name = "perplexity"
    rate_limit = RATE_LIMIT
    typical_latency_s = TYPICAL_LATENCY_S
    description = "Perplexity Search API (ranked web results, several queries per call)"
    settings_model = PerplexitySettings
    list_price = Price(per_request_usd=0.005)
    """Search API: $5 per 1,000 requests, no token costs (docs/platforms.md)."""
    endpoint = "/search"
    capabilities = Capabilities(multi_query=True)
    key_fields = ("api_key",)
    native = frozenset(
        {
            OptionName.INCLUDE_DOMAINS,
            OptionName.EXCLUDE_DOMAINS,
            OptionName.TIME_RANGE,
            OptionName.COUNTRY,
        }
    )

    def native_options(
        self, options: SearchOptions, settings: PerplexitySettings
    ) -> frozenset[OptionName]:
        """Excluded domains are native only when no domain is included (one filter, one mode)."""
        native = options.given() & self.native
        if domain_filter(options) is None or options.include_domains:
            native -= {OptionName.EXCLUDE_DOMAINS}
        if domain_filter(options) is None:
            native -= {OptionName.INCLUDE_DOMAINS}
        return native

    def build_request(
        self,
        queries: list[str],
        params: SearchParams,
        page: PageToken,
        settings: PerplexitySettings,
    ) -> RequestSpec:
        if len(queries) > MAX_QUERIES:
            raise ProviderError(self.name, f"at most {MAX_QUERIES} queries per call")
        body: dict[str, Any] = {
            "query": queries[0] if len(queries) == 1 else list(queries),
            "max_results": max(1, min(params.limit, MAX_RESULTS)),
        }
        if params.language:
            body["search_language_filter"] = [params.language[:2].lower()]
        options = params.options
        recency = options.time_range.value if options.time_range else None
        domains_given = options.given() & {OptionName.INCLUDE_DOMAINS, OptionName.EXCLUDE_DOMAINS}
        domains = domain_filter(options) if domains_given else settings.search_domain_filter
        for key, value in (
            ("max_tokens_per_page", settings.max_tokens_per_page),
            ("country", chosen(options, OptionName.COUNTRY, options.country, settings.country)),
            (
                "search_recency_filter",
                chosen(options, OptionName.TIME_RANGE, recency, settings.search_recency_filter),
            ),
        ):
            if value is not None:
                body[key] = value
        if domains:
            body["search_domain_filter"] = domains
        return RequestSpec(
            url=self.url(settings),
            method="POST",
            json=body,
            headers=bearer(settings.api_key),
        )

    def _hit(self, item: Any, query_index: int, **meta: Any) -> Hit | None:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            return None
        metadata = {k: item[k] for k in ("date", "last_updated") if item.get(k)}
        return Hit(
            title=as_str(item.get("title")),
            url=item["url"],
            snippet=as_str(item.get("snippet")),
            published_at=parse_date(item.get("date")),
            query_index=query_index,
            metadata={**metadata, **meta},
        )

    def parse_response(self, resp: ProviderResponse[PerplexitySettings]) -> Page:
        data = require(self.name, load_json(self.name, resp.body), dict, "the body")
        results = require(self.name, data.get("results", []), list, "`results`")
        grouped = [self._group(entry, i, resp.queries) for i, entry in enumerate(results)]
        hits: list[Hit] = []
        if results and all(g is not None for g in grouped):
            for qi, items in (g for g in grouped if g is not None):
                hits.extend(h for item in items if (h := self._hit(item, qi)) is not None)
            return Page(hits=hits)
        for qi in range(len(resp.queries)):
            extra = {"attribution": "batch"} if len(resp.queries) > 1 else {}
            hits.extend(h for item in results if (h := self._hit(item, qi, **extra)) is not None)
        return Page(hits=hits)

    def _group(self, entry: Any, position: int, queries: list[str]) -> tuple[int, list[Any]] | None:
        """(query index, items) when `entry` is one query's group, else None (a flat item)."""
        if isinstance(entry, list):
            return position, entry
        if isinstance(entry, dict) and isinstance(entry.get("results"), list):
            query = entry.get("query")
            index = queries.index(query) if query in queries else position
            return index, entry["results"]
        return None
