"""`google`: Google Programmable Search through the Custom Search JSON API.

Written from Google's "Custom Search JSON API: Using REST" and the `cse.list` reference
(developers.google.com/custom-search/v1/using_rest, .../v1/reference/rest/v1/cse/list):
`GET https://www.googleapis.com/customsearch/v1?key&cx&q&num&start`, `num` at most 10, `start`
1-based, at most 100 results per query; results in `items[]`, absent when there are none. So
paging past 10 asks for start=1, 11, 21, ...; a bad key is a 400 whose reason says so.

Request options, from the same `cse.list` reference: `siteSearch` with `siteSearchFilter`
(`i` include, `e` exclude) takes one site, so it carries the domain option only when that option
names exactly one domain (the included one first, when both do); several domains are not native
and are post-filtered. They are deliberately not turned into `site:` operators in `q`: Google
reads at most 32 words of a query, so twenty domains would silently push the user's own words
out. `dateRestrict` takes `d1`/`w1`/`m1`/`y1`; `gl` the lower-case country code (it boosts
results from that country); `safe` is `active` or `off` (no middle level, so `moderate` asks for
`active`). A request's safe search overrides `FANFUSE_GOOGLE_SAFE`.
"""

from __future__ import annotations

from pydantic import Field, SecretStr

from fanfuse.net.policy import RateLimit, concurrency_for
from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.contract import Platform, SearchParams
from fanfuse.platforms.http_api import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.native import chosen
from fanfuse.platforms.parsing import as_str, error_detail, load_json, require, secret
from fanfuse.wire.cost import Price
from fanfuse.wire.errors import ProviderError
from fanfuse.wire.models import FailureKind, Hit
from fanfuse.wire.options import OptionName, SafeSearch, SearchOptions, TimeRange

PAGE_SIZE = 10
MAX_RESULTS = 100  # the API serves at most the first 100 results of a query
DATE_RESTRICT = {
    TimeRange.DAY: "d1",
    TimeRange.WEEK: "w1",
    TimeRange.MONTH: "m1",
    TimeRange.YEAR: "y1",
}
SAFE = {SafeSearch.OFF: "off", SafeSearch.MODERATE: "active", SafeSearch.STRICT: "active"}


def site_search(options: SearchOptions) -> tuple[str, str] | None:
    """(`siteSearch`, `siteSearchFilter`) for the request's domains, when one fits in it."""
    if len(options.include_domains) == 1:
        return options.include_domains[0], "i"
    if len(options.exclude_domains) == 1:
        return options.exclude_domains[0], "e"
    return None


RATE_LIMIT = RateLimit(
    "Custom Search JSON API: 100 queries a minute per project (the default quota; unverified), "
    "10,000 a day paid",
    per_second=100 / 60,
)


class GoogleSettings(HttpSettings):
    max_concurrency: int = Field(
        default=concurrency_for(RATE_LIMIT, Platform.typical_latency_s), ge=1
    )
    api_key: SecretStr
    cx: str
    """The Programmable Search Engine id."""
    base_url: str = "https://www.googleapis.com"
    safe: str | None = None
    max_pages: int = 10


class GooglePlatform(HttpPlatform[GoogleSettings]):
    name = "google"
    rate_limit = RATE_LIMIT
    description = "Google Programmable Search (Custom Search JSON API)"
    settings_model = GoogleSettings
    list_price = Price(per_request_usd=0.005)
    """$5 per 1,000 queries past the 100 free a day (docs/platforms.md); the free 100 are not
    counted here, so a small deployment's receipts err high."""
    page_size = PAGE_SIZE
    endpoint = "/customsearch/v1"
    key_fields = ("api_key",)
    native = frozenset(OptionName)

    def native_options(
        self, options: SearchOptions, settings: GoogleSettings
    ) -> frozenset[OptionName]:
        """All but the domain option `siteSearch` cannot carry (two domains or more)."""
        domains = {OptionName.INCLUDE_DOMAINS, OptionName.EXCLUDE_DOMAINS}
        native = (options.given() & self.native) - domains
        site = site_search(options)
        if site is not None:
            native |= {OptionName.INCLUDE_DOMAINS if site[1] == "i" else OptionName.EXCLUDE_DOMAINS}
        return native

    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: GoogleSettings
    ) -> RequestSpec:
        start = int(page or 1)
        num = max(1, min(PAGE_SIZE, params.limit - start + 1, MAX_RESULTS - start + 1))
        query: list[tuple[str, str | int | float]] = [
            ("key", secret(settings.api_key)),
            ("cx", settings.cx),
            ("q", queries[0]),
            ("num", num),
            ("start", start),
        ]
        if params.language:
            query.append(("hl", params.language))
        options = params.options
        site = site_search(options)
        if site is not None:
            query += [("siteSearch", site[0]), ("siteSearchFilter", site[1])]
        if options.time_range is not None:
            query.append(("dateRestrict", DATE_RESTRICT[options.time_range]))
        if options.country:
            query.append(("gl", options.country.lower()))
        safe = SAFE[options.safesearch] if options.safesearch else None
        safe = chosen(options, OptionName.SAFESEARCH, safe, settings.safe)
        if safe:
            query.append(("safe", safe))
        return RequestSpec(url=self.url(settings), params=query, secret_params=frozenset({"key"}))

    def check_response(self, resp: ProviderResponse[GoogleSettings]) -> None:
        detail = error_detail(resp.body)
        if resp.status == 400 and (
            "API key" in detail or "API_KEY" in resp.body.decode(errors="replace")
        ):
            raise ProviderError(
                self.name,
                f"HTTP 400: credentials rejected (check {self.settings_env_name('api_key')}): "
                f"{detail}",
                FailureKind.DENIED,  # our key, not the caller's query: a 400 only by its status
            )
        super().check_response(resp)

    def parse_response(self, resp: ProviderResponse[GoogleSettings]) -> Page:
        data = require(self.name, load_json(self.name, resp.body), dict, "the body")
        items = require(self.name, data.get("items", []), list, "`items`")
        hits = [
            Hit(
                title=as_str(item.get("title")),
                url=item["link"],
                snippet=as_str(item.get("snippet")),
                metadata={
                    k: item[k] for k in ("displayLink", "formattedUrl", "mime") if item.get(k)
                },
            )
            for item in items
            if isinstance(item, dict) and isinstance(item.get("link"), str)
        ]
        start = int(resp.page or 1)
        following = start + len(items)
        has_next = (
            bool(data.get("queries", {}).get("nextPage"))
            if isinstance(data.get("queries"), dict)
            else len(items) == PAGE_SIZE
        )
        more = hits and has_next and following <= MAX_RESULTS
        return Page(hits=hits, next_page=following if more else None)
