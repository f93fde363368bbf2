"""`tavily`: the Tavily Search API.

Written from Tavily's API reference (docs.tavily.com/api-reference, "Tavily Search",
`POST https://api.tavily.com/search`): bearer key (`tvly-...`); body `{query, search_depth,
topic, max_results (<=20), time_range, include_domains, exclude_domains, include_raw_content,
country}`; answer `results[]` of `{title, url, content, score, raw_content, published_date}`
plus `answer` and `response_time`. When the search wants page content it asks for
`include_raw_content`, so the fetching stage has nothing left to fetch for those hits.

Request options, from the same reference: `include_domains` (at most 300) and `exclude_domains`
(at most 150) take host names; `time_range` takes `day`/`week`/`month`/`year` as they are;
`country` takes a lower-case country *name* from Tavily's list ("united states"), and only with
`topic` `general`. So a request's ISO code is native only when Tavily lists that country
(`COUNTRY_NAMES`) and the deployment's topic is `general`; otherwise no country is sent. Tavily
has no safe-search parameter. A request's value overrides `FANFUSE_TAVILY_TIME_RANGE`,
`_COUNTRY`, `_INCLUDE_DOMAINS` and `_EXCLUDE_DOMAINS`, which stay the defaults.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr

from fanfuse.net.policy import RateLimit, concurrency_for
from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.contract import Platform, SearchParams
from fanfuse.platforms.http_api import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.native import chosen
from fanfuse.platforms.parsing import (
    as_float,
    as_str,
    bearer,
    json_items,
    load_json,
    parse_date,
    require,
)
from fanfuse.wire.cost import Price
from fanfuse.wire.models import Hit
from fanfuse.wire.options import OptionName, SearchOptions

MAX_RESULTS = 20
COUNTRY_NAMES = {
    "AF": "afghanistan", "AL": "albania", "DZ": "algeria", "AD": "andorra", "AO": "angola",
    "AR": "argentina", "AM": "armenia", "AU": "australia", "AT": "austria", "AZ": "azerbaijan",
    "BS": "bahamas", "BH": "bahrain", "BD": "bangladesh", "BB": "barbados", "BY": "belarus",
    "BE": "belgium", "BZ": "belize", "BJ": "benin", "BT": "bhutan", "BO": "bolivia",
    "BA": "bosnia and herzegovina", "BW": "botswana", "BR": "brazil", "BN": "brunei",
    "BG": "bulgaria", "BF": "burkina faso", "BI": "burundi", "KH": "cambodia", "CM": "cameroon",
    "CA": "canada", "CV": "cape verde", "CF": "central african republic", "TD": "chad",
    "CL": "chile", "CN": "china", "CO": "colombia", "KM": "comoros", "CG": "congo",
    "CR": "costa rica", "HR": "croatia", "CU": "cuba", "CY": "cyprus", "CZ": "czech republic",
    "DK": "denmark", "DJ": "djibouti", "DO": "dominican republic", "EC": "ecuador",
    "EG": "egypt", "SV": "el salvador", "GQ": "equatorial guinea", "ER": "eritrea",
    "EE": "estonia", "ET": "ethiopia", "FJ": "fiji", "FI": "finland", "FR": "france",
    "GA": "gabon", "GM": "gambia", "GE": "georgia", "DE": "germany", "GH": "ghana",
    "GR": "greece", "GT": "guatemala", "GN": "guinea", "HT": "haiti", "HN": "honduras",
    "HU": "hungary", "IS": "iceland", "IN": "india", "ID": "indonesia", "IR": "iran",
    "IQ": "iraq", "IE": "ireland", "IL": "israel", "IT": "italy", "JM": "jamaica",
    "JP": "japan", "JO": "jordan", "KZ": "kazakhstan", "KE": "kenya", "KW": "kuwait",
    "KG": "kyrgyzstan", "LV": "latvia", "LB": "lebanon", "LS": "lesotho", "LR": "liberia",
    "LY": "libya", "LI": "liechtenstein", "LT": "lithuania", "LU": "luxembourg",
    "MG": "madagascar", "MW": "malawi", "MY": "malaysia", "MV": "maldives", "ML": "mali",
    "MT": "malta", "MR": "mauritania", "MU": "mauritius", "MX": "mexico", "MD": "moldova",
    "MC": "monaco", "MN": "mongolia", "ME": "montenegro", "MA": "morocco", "MZ": "mozambique",
    "MM": "myanmar", "NA": "namibia", "NP": "nepal", "NL": "netherlands", "NZ": "new zealand",
    "NI": "nicaragua", "NE": "niger", "NG": "nigeria", "KP": "north korea",
    "MK": "north macedonia", "NO": "norway", "OM": "oman", "PK": "pakistan", "PA": "panama",
    "PG": "papua new guinea", "PY": "paraguay", "PE": "peru", "PH": "philippines",
    "PL": "poland", "PT": "portugal", "QA": "qatar", "RO": "romania", "RU": "russia",
    "RW": "rwanda", "SA": "saudi arabia", "SN": "senegal", "RS": "serbia", "SG": "singapore",
    "SK": "slovakia", "SI": "slovenia", "SO": "somalia", "ZA": "south africa",
    "KR": "south korea", "SS": "south sudan", "ES": "spain", "LK": "sri lanka", "SD": "sudan",
    "SE": "sweden", "CH": "switzerland", "SY": "syria", "TW": "taiwan", "TJ": "tajikistan",
    "TZ": "tanzania", "TH": "thailand", "TG": "togo", "TT": "trinidad and tobago",
    "TN": "tunisia", "TR": "turkey", "TM": "turkmenistan", "UG": "uganda", "UA": "ukraine",
    "AE": "united arab emirates", "GB": "united kingdom", "US": "united states",
    "UY": "uruguay", "UZ": "uzbekistan", "VE": "venezuela", "VN": "vietnam", "YE": "yemen",
    "ZM": "zambia", "ZW": "zimbabwe",
}  # fmt: skip
"""ISO 3166-1 alpha-2 -> the name Tavily's `country` takes, for the countries Tavily lists (its
`congo` is read as the Republic of the Congo, CG; CD is left out as ambiguous)."""


RATE_LIMIT = RateLimit(
    "Tavily: 100 requests a minute with a development key (1,000 with a production key)",
    per_second=100 / 60,
)


class TavilySettings(HttpSettings):
    max_concurrency: int = Field(
        default=concurrency_for(RATE_LIMIT, Platform.typical_latency_s), ge=1
    )
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
    rate_limit = RATE_LIMIT
    description = "Tavily Search API (LLM-oriented web search, optional raw page content)"
    settings_model = TavilySettings
    list_price = Price(per_request_usd=0.008)
    """Pay-as-you-go: $0.008 a credit; a basic search is 1 credit, an advanced one 2
    (`price`; docs/platforms.md)."""

    def price(self, settings: TavilySettings | None) -> Price:
        if settings is not None and settings.search_depth == "advanced":
            return Price(per_request_usd=2 * self.list_price.per_request_usd)
        return self.list_price

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

    def native_options(
        self, options: SearchOptions, settings: TavilySettings
    ) -> frozenset[OptionName]:
        """Domains and time always; the country when Tavily names it and the topic allows it."""
        native = options.given() & self.native
        if country_name(options, settings) is None:
            native -= {OptionName.COUNTRY}
        return native

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
        options = params.options
        mapped: dict[OptionName, Any] = {
            OptionName.TIME_RANGE: options.time_range.value if options.time_range else None,
            OptionName.COUNTRY: country_name(options, settings),
            OptionName.INCLUDE_DOMAINS: options.include_domains,
            OptionName.EXCLUDE_DOMAINS: options.exclude_domains,
        }
        for name, value in mapped.items():  # body keys, option names and settings agree here
            chosen_value = chosen(options, name, value, getattr(settings, name.value))
            if chosen_value:
                body[name.value] = chosen_value
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


def country_name(options: SearchOptions, settings: TavilySettings) -> str | None:
    """Tavily's name for the request's country, None when it has none or the topic forbids it."""
    if options.country is None or settings.topic != "general":
        return None
    return COUNTRY_NAMES.get(options.country)
