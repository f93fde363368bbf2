"""`brave`: the Brave Search API (web search).

Written from Brave's "Web Search API" documentation (api-dashboard.search.brave.com,
"Documentation > Web search > Query parameters / Response objects"):
`GET https://api.search.brave.com/res/v1/web/search?q&count(<=20)&offset(<=9)&search_lang&
country&safesearch&freshness`, header `X-Subscription-Token`; results in `web.results[]` with
`title, url, description, age, page_age, extra_snippets, meta_url`; `query.more_results_available`
says whether another page exists. `offset` counts pages of `count` results, not results. A bad
token answers 401 or 422 (`SUBSCRIPTION_TOKEN_INVALID`).

Request options, from the same query-parameter reference (api-dashboard.search.brave.com,
"API reference > Web search > GET", checked against Brave's own MCP server's parameter schema):
`freshness` `pd`/`pw`/`pm`/`py`; `safesearch` `off`/`moderate`/`strict`; `country` one of the
upper-case codes Brave lists (`COUNTRIES`), so any other country is not native. Brave has no
domain parameter: domains are post-filtered. A request's value overrides `FANFUSE_BRAVE_COUNTRY`,
`_SAFESEARCH` and `_FRESHNESS`, which stay the defaults; a country Brave does not list sends no
country at all rather than the deployment's default.
"""

from __future__ import annotations

from pydantic import Field, SecretStr

from fanfuse.net.policy import RateLimit, concurrency_for
from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.contract import Platform, SearchParams
from fanfuse.platforms.http_api import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.native import chosen
from fanfuse.platforms.parsing import (
    error_detail,
    json_items,
    load_json,
    parse_date,
    require,
    secret,
    strip_html,
)
from fanfuse.wire.cost import Price
from fanfuse.wire.errors import ProviderError
from fanfuse.wire.models import FailureKind, Hit
from fanfuse.wire.options import OptionName, SearchOptions, TimeRange

PAGE_SIZE = 20
MAX_OFFSET = 9
FRESHNESS = {TimeRange.DAY: "pd", TimeRange.WEEK: "pw", TimeRange.MONTH: "pm", TimeRange.YEAR: "py"}
COUNTRIES = frozenset(
    {
        "AR", "AU", "AT", "BE", "BR", "CA", "CL", "DK", "FI", "FR", "DE", "HK", "IN", "ID", "IT",
        "JP", "KR", "MY", "MX", "NL", "NZ", "NO", "CN", "PL", "PT", "PH", "RU", "SA", "ZA", "ES",
        "SE", "CH", "TW", "TR", "GB", "US",
    }
)  # fmt: skip
"""The search countries Brave serves (besides `ALL`)."""


RATE_LIMIT = RateLimit("Brave Search API, Search plan: 50 requests a second", per_second=50.0)


class BraveSettings(HttpSettings):
    max_concurrency: int = Field(
        default=concurrency_for(RATE_LIMIT, Platform.typical_latency_s), ge=1
    )
    api_key: SecretStr
    base_url: str = "https://api.search.brave.com"
    country: str | None = None
    safesearch: str | None = None
    freshness: str | None = None


class BravePlatform(HttpPlatform[BraveSettings]):
    name = "brave"
    rate_limit = RATE_LIMIT
    description = "Brave Search API (independent web index)"
    settings_model = BraveSettings
    list_price = Price(per_request_usd=0.005)
    """Search plan: $5 per 1,000 requests, successful ones only (docs/platforms.md)."""
    page_size = PAGE_SIZE
    endpoint = "/res/v1/web/search"
    key_fields = ("api_key",)
    native = frozenset({OptionName.TIME_RANGE, OptionName.COUNTRY, OptionName.SAFESEARCH})

    def native_options(
        self, options: SearchOptions, settings: BraveSettings
    ) -> frozenset[OptionName]:
        """Time and safe search always; the country only when Brave lists it."""
        native = options.given() & self.native
        if options.country not in COUNTRIES:
            native -= {OptionName.COUNTRY}
        return native

    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: BraveSettings
    ) -> RequestSpec:
        query: list[tuple[str, str | int | float]] = [
            ("q", queries[0]),
            ("count", max(1, min(params.limit, PAGE_SIZE))),
            ("offset", int(page or 0)),
        ]
        if params.language:
            query.append(("search_lang", params.language[:2].lower()))
        options = params.options
        country = options.country if options.country in COUNTRIES else None
        safesearch = options.safesearch.value if options.safesearch else None
        freshness = FRESHNESS[options.time_range] if options.time_range else None
        for key, value in (
            ("country", chosen(options, OptionName.COUNTRY, country, settings.country)),
            ("safesearch", chosen(options, OptionName.SAFESEARCH, safesearch, settings.safesearch)),
            ("freshness", chosen(options, OptionName.TIME_RANGE, freshness, settings.freshness)),
        ):
            if value:
                query.append((key, value))
        return RequestSpec(
            url=self.url(settings),
            params=query,
            headers={
                "Accept": "application/json",
                "X-Subscription-Token": secret(settings.api_key),
            },
        )

    def check_response(self, resp: ProviderResponse[BraveSettings]) -> None:
        if resp.status == 422 and b"TOKEN" in resp.body.upper():
            raise ProviderError(
                self.name,
                f"HTTP 422: credentials rejected (check {self.settings_env_name('api_key')}): "
                f"{error_detail(resp.body)}",
                FailureKind.DENIED,  # our key, not the caller's query: a 422 only by its status
            )
        super().check_response(resp)

    def parse_response(self, resp: ProviderResponse[BraveSettings]) -> Page:
        data = require(self.name, load_json(self.name, resp.body), dict, "the body")
        hits = []
        for item in json_items(self.name, data, "web", "results"):
            meta = {k: item[k] for k in ("age", "page_age", "language") if item.get(k)}
            extra = item.get("extra_snippets")
            if isinstance(extra, list) and extra:
                meta["extra_snippets"] = [strip_html(s) for s in extra]
            hits.append(
                Hit(
                    title=strip_html(item.get("title")),
                    url=item["url"],
                    snippet=strip_html(item.get("description")),
                    published_at=parse_date(item.get("page_age")),
                    metadata=meta,
                )
            )
        offset = int(resp.page or 0)
        query = data.get("query") if isinstance(data.get("query"), dict) else {}
        more = bool(query.get("more_results_available")) and offset < MAX_OFFSET
        return Page(hits=hits, next_page=offset + 1 if hits and more else None)
