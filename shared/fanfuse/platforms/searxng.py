"""`searxng`: a SearXNG instance through its JSON search API.

Written from SearXNG's "Search API" page (docs.searxng.org/dev/search_api): `GET /search` with
`q`, `format=json`, `categories`, `engines`, `language`, `pageno`, `time_range`, `safesearch`;
an instance that has not enabled the json format answers 403. Several named instances can run
side by side (`FANFUSE_EXTRA_PLATFORMS`), each with its own `base_url`.

Request options: `time_range` (`day`, `week`, `month`, `year`: the page lists day/month/year,
SearXNG's `webadapter.parse_time_range` accepts week too) and `safesearch` (`0` off, `1`
moderate, `2` strict). With a time range set, SearXNG leaves out the engines that cannot apply
one (`time_range_support`), so the range is native. There is no country or domain parameter
(the `language` parameter is a locale, not a region filter): domains are post-filtered, the
country is not applied. A request's value overrides `FANFUSE_SEARXNG_TIME_RANGE` and
`_SAFESEARCH`, which stay the defaults.
"""

from __future__ import annotations

from pydantic import Field

from fanfuse.net.policy import RateLimit, concurrency_for
from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.contract import Platform, SearchParams
from fanfuse.platforms.http_api import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.native import chosen
from fanfuse.platforms.parsing import as_float, as_str, json_items, load_json, parse_date, require
from fanfuse.wire.errors import ProviderError
from fanfuse.wire.models import Hit
from fanfuse.wire.options import OptionName, SafeSearch

SAFESEARCH = {SafeSearch.OFF: 0, SafeSearch.MODERATE: 1, SafeSearch.STRICT: 2}


SEARXNG_PAGE = 10
"""Results a SearXNG page holds, about (its engines decide): what the cost plan pages by."""

RATE_LIMIT = RateLimit("self-hosted: the instance's own limiter, if enabled", self_hosted=True)


class SearxngSettings(HttpSettings):
    max_concurrency: int = Field(
        default=concurrency_for(RATE_LIMIT, Platform.typical_latency_s), ge=1
    )
    base_url: str
    """The instance, e.g. `https://searx.example.org` (required: there is no default instance)."""
    categories: str | None = None
    engines: str | None = None
    safesearch: int | None = None
    time_range: str | None = None


class SearxngPlatform(HttpPlatform[SearxngSettings]):
    name = "searxng"
    rate_limit = RATE_LIMIT
    description = "a SearXNG metasearch instance (JSON format must be enabled)"
    settings_model = SearxngSettings
    page_size = SEARXNG_PAGE
    endpoint = "/search"
    native = frozenset({OptionName.TIME_RANGE, OptionName.SAFESEARCH})

    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: SearxngSettings
    ) -> RequestSpec:
        query: list[tuple[str, str | int | float]] = [("q", queries[0]), ("format", "json")]
        query.append(("pageno", int(page or 1)))
        for key in ("categories", "engines"):
            value = getattr(settings, key)
            if value:
                query.append((key, value))
        options = params.options
        time_range = options.time_range.value if options.time_range else None
        time_range = chosen(options, OptionName.TIME_RANGE, time_range, settings.time_range)
        if time_range:
            query.append(("time_range", time_range))
        level = SAFESEARCH[options.safesearch] if options.safesearch else None
        safesearch = chosen(options, OptionName.SAFESEARCH, level, settings.safesearch)
        if safesearch is not None:
            query.append(("safesearch", safesearch))
        if params.language:
            query.append(("language", params.language))
        return RequestSpec(
            url=self.url(settings),
            params=query,
            headers={"Accept": "application/json"},
        )

    def check_response(self, resp: ProviderResponse[SearxngSettings]) -> None:
        if resp.status == 403:
            raise ProviderError(
                self.name,
                f"HTTP 403 from {resp.settings.base_url}: the instance does not serve format=json "
                "(add `json` to `search.formats` in its settings.yml) or refuses this client",
            )
        super().check_response(resp)

    def parse_response(self, resp: ProviderResponse[SearxngSettings]) -> Page:
        data = require(self.name, load_json(self.name, resp.body), dict, "the body")
        hits: list[Hit] = []
        for item in json_items(self.name, data, "results"):
            hits.append(
                Hit(
                    title=as_str(item.get("title")),
                    url=item["url"],
                    snippet=as_str(item.get("content")),
                    score=as_float(item.get("score")),
                    published_at=parse_date(item.get("publishedDate")),
                    metadata={
                        k: item[k]
                        for k in ("engine", "engines", "category", "positions")
                        if item.get(k) is not None
                    },
                )
            )
        return Page(hits=hits, next_page=int(resp.page or 1) + 1 if hits else None)
