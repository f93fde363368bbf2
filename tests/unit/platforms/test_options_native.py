"""Each adapter's request builder with each request option, in its provider's documented terms.

One table: a platform, the request's options (and settings, for the env-default-versus-request
rule), what the request must carry (query parameters, or the JSON body; `ABSENT` for a key that
must not be there) and which of the options `native_options` claims. The parameter names and
values are the ones each adapter's module docstring cites from its provider's reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from fanfuse.platforms import load_engine
from fanfuse.platforms.contract import Platform, SearchParams
from fanfuse.platforms.http_api import HttpPlatform
from fanfuse.wire.options import OptionName, SearchOptions
from tests.support.platforms import cases

NOW = datetime(2025, 6, 15, 12, 30, tzinfo=UTC)
BASE = "http://127.0.0.1:9"  # never contacted: only request builders run here
ABSENT = object()
INC, E, T, C, S = (
    OptionName.INCLUDE_DOMAINS,
    OptionName.EXCLUDE_DOMAINS,
    OptionName.TIME_RANGE,
    OptionName.COUNTRY,
    OptionName.SAFESEARCH,
)


@dataclass
class Case:
    id: str
    make: Callable[..., Platform[Any]]
    options: dict[str, Any]
    sent: dict[str, Any]
    native: set[OptionName]
    settings: dict[str, Any] = field(default_factory=dict)
    query: str = "rust async"


def glm(base: str, **over: Any) -> Platform[Any]:
    return cases._builtin(base, base_url="https://open.bigmodel.cn/api/paas/v4", **over)


GLM_TOOL = "tools.0.web_search."
QWEN = "search_options."

CASES = [
    # Google cse.list: siteSearch + siteSearchFilter (one site), dateRestrict, gl, safe.
    Case("google-include-one", cases._google, {"include_domains": ["example.org"]},
         {"siteSearch": "example.org", "siteSearchFilter": "i"}, {INC}),
    Case("google-exclude-one", cases._google, {"exclude_domains": ["spam.example.com"]},
         {"siteSearch": "spam.example.com", "siteSearchFilter": "e"}, {E}),
    Case("google-include-wins-the-one-site", cases._google,
         {"include_domains": ["example.org"], "exclude_domains": ["spam.example.org"]},
         {"siteSearch": "example.org", "siteSearchFilter": "i"}, {INC}),
    Case("google-two-includes-not-native", cases._google,
         {"include_domains": ["example.org", "example.net"]},
         {"siteSearch": ABSENT, "siteSearchFilter": ABSENT, "q": "rust async"}, set()),
    Case("google-two-includes-one-exclude", cases._google,
         {"include_domains": ["example.org", "example.net"], "exclude_domains": ["x.example.org"]},
         {"siteSearch": "x.example.org", "siteSearchFilter": "e"}, {E}),
    Case("google-day", cases._google, {"time_range": "day"}, {"dateRestrict": "d1"}, {T}),
    Case("google-week", cases._google, {"time_range": "week"}, {"dateRestrict": "w1"}, {T}),
    Case("google-month", cases._google, {"time_range": "month"}, {"dateRestrict": "m1"}, {T}),
    Case("google-year", cases._google, {"time_range": "year"}, {"dateRestrict": "y1"}, {T}),
    Case("google-country", cases._google, {"country": "DE"}, {"gl": "de"}, {C}),
    Case("google-strict", cases._google, {"safesearch": "strict"}, {"safe": "active"}, {S}),
    Case("google-moderate", cases._google, {"safesearch": "moderate"}, {"safe": "active"}, {S}),
    Case("google-request-off-beats-env", cases._google, {"safesearch": "off"}, {"safe": "off"},
         {S}, settings={"safe": "active"}),
    Case("google-env-safe-default", cases._google, {}, {"safe": "active"}, set(),
         settings={"safe": "active"}),
    # Brave web search: freshness pd/pw/pm/py, country (Brave's list), safesearch.
    Case("brave-day", cases._brave, {"time_range": "day"}, {"freshness": "pd"}, {T}),
    Case("brave-week", cases._brave, {"time_range": "week"}, {"freshness": "pw"}, {T}),
    Case("brave-month", cases._brave, {"time_range": "month"}, {"freshness": "pm"}, {T}),
    Case("brave-year", cases._brave, {"time_range": "year"}, {"freshness": "py"}, {T}),
    Case("brave-country", cases._brave, {"country": "DE"}, {"country": "DE"}, {C}),
    Case("brave-unlisted-country-sends-none", cases._brave, {"country": "IS"},
         {"country": ABSENT}, set(), settings={"country": "US"}),
    Case("brave-env-country-default", cases._brave, {}, {"country": "US"}, set(),
         settings={"country": "US"}),
    Case("brave-safesearch", cases._brave, {"safesearch": "off"}, {"safesearch": "off"}, {S},
         settings={"safesearch": "strict"}),
    Case("brave-env-freshness-default", cases._brave, {}, {"freshness": "pm"}, set(),
         settings={"freshness": "pm"}),
    Case("brave-domains-post-filtered", cases._brave,
         {"include_domains": ["example.org"], "exclude_domains": ["x.example.org"]},
         {"q": "rust async"}, set()),
    # Tavily /search: include_domains, exclude_domains, time_range, country (a name).
    Case("tavily-domains", cases._tavily,
         {"include_domains": ["example.org"], "exclude_domains": ["x.example.org"]},
         {"include_domains": ["example.org"], "exclude_domains": ["x.example.org"]}, {INC, E}),
    Case("tavily-request-domains-beat-env", cases._tavily, {"include_domains": ["req.org"]},
         {"include_domains": ["req.org"], "exclude_domains": ["env-x.org"]}, {INC},
         settings={"include_domains": ["env.org"], "exclude_domains": ["env-x.org"]}),
    Case("tavily-env-domains-default", cases._tavily, {}, {"include_domains": ["env.org"]},
         set(), settings={"include_domains": ["env.org"]}),
    Case("tavily-time", cases._tavily, {"time_range": "month"}, {"time_range": "month"}, {T},
         settings={"time_range": "year"}),
    Case("tavily-country-name", cases._tavily, {"country": "US"}, {"country": "united states"},
         {C}, settings={"country": "germany"}),
    Case("tavily-country-only-for-general", cases._tavily, {"country": "US"},
         {"country": ABSENT, "topic": "news"}, set(), settings={"topic": "news"}),
    Case("tavily-unlisted-country", cases._tavily, {"country": "AQ"}, {"country": ABSENT}, set(),
         settings={"country": "germany"}),
    Case("tavily-no-safesearch", cases._tavily, {"safesearch": "strict"},
         {"safesearch": ABSENT, "safe_search": ABSENT}, set()),
    # Exa /search: includeDomains, excludeDomains, startPublishedDate (ISO 8601), userLocation.
    Case("exa-domains", cases._exa,
         {"include_domains": ["example.org"], "exclude_domains": ["x.example.org"]},
         {"includeDomains": ["example.org"], "excludeDomains": ["x.example.org"]}, {INC, E},
         settings={"include_domains": ["env.org"]}),
    Case("exa-env-domains-default", cases._exa, {}, {"excludeDomains": ["env-x.org"]}, set(),
         settings={"exclude_domains": ["env-x.org"]}),
    Case("exa-week", cases._exa, {"time_range": "week"},
         {"startPublishedDate": "2025-06-08T12:30:00.000Z"}, {T}),
    Case("exa-country", cases._exa, {"country": "FR"}, {"userLocation": "FR"}, {C}),
    Case("exa-no-safesearch", cases._exa, {"safesearch": "strict"}, {"moderation": ABSENT}, set()),
    # Linkup /v1/search: includeDomains, excludeDomains, fromDate (YYYY-MM-DD).
    Case("linkup-domains", cases._linkup,
         {"include_domains": ["example.org"], "exclude_domains": ["x.example.org"]},
         {"includeDomains": ["example.org"], "excludeDomains": ["x.example.org"]}, {INC, E},
         settings={"exclude_domains": ["env-x.org"]}),
    Case("linkup-env-domains-default", cases._linkup, {}, {"includeDomains": ["env.org"]},
         set(), settings={"include_domains": ["env.org"]}),
    Case("linkup-week", cases._linkup, {"time_range": "week"}, {"fromDate": "2025-06-08"}, {T}),
    Case("linkup-year", cases._linkup, {"time_range": "year"}, {"fromDate": "2024-06-14"}, {T}),
    Case("linkup-no-country-or-safesearch", cases._linkup,
         {"country": "DE", "safesearch": "strict"}, {"country": ABSENT}, set()),
    # Perplexity /search: search_domain_filter (allow- or "-" denylist, <= 20),
    # search_recency_filter, country.
    Case("perplexity-allowlist", cases._perplexity, {"include_domains": ["example.org"]},
         {"search_domain_filter": ["example.org"]}, {INC},
         settings={"search_domain_filter": ["env.org"]}),
    Case("perplexity-denylist", cases._perplexity, {"exclude_domains": ["spam.example.com"]},
         {"search_domain_filter": ["-spam.example.com"]}, {E},
         settings={"search_domain_filter": ["env.org"]}),
    Case("perplexity-never-mixed", cases._perplexity,
         {"include_domains": ["example.org"], "exclude_domains": ["x.example.org"]},
         {"search_domain_filter": ["example.org"]}, {INC}),
    Case("perplexity-env-filter-default", cases._perplexity, {},
         {"search_domain_filter": ["env.org", "-env-x.org"]}, set(),
         settings={"search_domain_filter": ["env.org", "-env-x.org"]}),
    Case("perplexity-recency", cases._perplexity, {"time_range": "day"},
         {"search_recency_filter": "day"}, {T}, settings={"search_recency_filter": "hour"}),
    Case("perplexity-env-recency-default", cases._perplexity, {},
         {"search_recency_filter": "hour"}, set(), settings={"search_recency_filter": "hour"}),
    Case("perplexity-country", cases._perplexity, {"country": "DE"}, {"country": "DE"}, {C},
         settings={"country": "US"}),
    Case("perplexity-no-safesearch", cases._perplexity, {"safesearch": "strict"},
         {"safesearch": ABSENT}, set()),
    # SearXNG /search: time_range, safesearch 0/1/2; no country.
    Case("searxng-time", cases._searxng, {"time_range": "week"}, {"time_range": "week"}, {T},
         settings={"time_range": "year"}),
    Case("searxng-env-time-default", cases._searxng, {}, {"time_range": "year"}, set(),
         settings={"time_range": "year"}),
    Case("searxng-strict", cases._searxng, {"safesearch": "strict"}, {"safesearch": 2}, {S},
         settings={"safesearch": 0}),
    Case("searxng-moderate", cases._searxng, {"safesearch": "moderate"}, {"safesearch": 1}, {S}),
    Case("searxng-off", cases._searxng, {"safesearch": "off"}, {"safesearch": 0}, {S},
         settings={"safesearch": 2}),
    Case("searxng-no-country", cases._searxng, {"country": "DE"}, {"language": ABSENT}, set()),
    # arXiv: submittedDate:[YYYYMMDDTTTT TO YYYYMMDDTTTT] (GMT) in search_query.
    Case("arxiv-week", cases._arxiv, {"time_range": "week"},
         {"search_query": "all:rust AND all:async"
                          " AND submittedDate:[202506081230 TO 202506151230]"}, {T}),
    Case("arxiv-domains-post-filtered", cases._arxiv, {"include_domains": ["arxiv.org"]},
         {"search_query": "all:rust AND all:async"}, set()),
    # SEC EDGAR full-text search: dateRange=custom, startdt, enddt.
    Case("sec-month", cases._sec_edgar, {"time_range": "month"},
         {"dateRange": "custom", "startdt": "2025-05-15", "enddt": "2025-06-15"}, {T},
         settings={"startdt": "2001-01-01", "enddt": "2001-12-31"}),
    Case("sec-env-dates-default", cases._sec_edgar, {},
         {"dateRange": "custom", "startdt": "2001-01-01", "enddt": "2001-12-31"}, set(),
         settings={"startdt": "2001-01-01", "enddt": "2001-12-31"}),
    # weixin: Sogou's tsn is sent as a hint, the range is post-filtered (not native).
    Case("weixin-week-hint", cases._weixin, {"time_range": "week"},
         {"tsn": 2, "ft": "", "et": ""}, set()),
    Case("weixin-no-time", cases._weixin, {}, {"tsn": ABSENT}, set()),
    # builtin, Qwen flavor (no fallback): search_options.assigned_site_list / freshness (days).
    Case("qwen-sites-and-freshness", cases._builtin,
         {"include_domains": ["example.org", "example.net"], "time_range": "month"},
         {QWEN + "assigned_site_list": ["example.org", "example.net"], QWEN + "freshness": 30},
         {INC, T}),
    Case("qwen-no-day-freshness", cases._builtin, {"time_range": "day"},
         {QWEN + "freshness": ABSENT}, set()),
    Case("qwen-no-exclusion-country-safesearch", cases._builtin,
         {"exclude_domains": ["x.example.org"], "country": "CN", "safesearch": "strict"},
         {QWEN + "enable_source": True, QWEN + "assigned_site_list": ABSENT}, set()),
    # builtin, GLM flavor: web_search.search_domain_filter (one) / search_recency_filter.
    Case("glm-one-domain-and-recency", glm,
         {"include_domains": ["example.org"], "time_range": "week"},
         {GLM_TOOL + "search_domain_filter": "example.org",
          GLM_TOOL + "search_recency_filter": "oneWeek"}, {INC, T}),
    Case("glm-two-domains-not-native", glm, {"include_domains": ["a.example", "b.example"]},
         {GLM_TOOL + "search_domain_filter": ABSENT}, set()),
    Case("glm-day", glm, {"time_range": "day"}, {GLM_TOOL + "search_recency_filter": "oneDay"},
         {T}),
]  # fmt: skip


def search_params(options: dict[str, Any], query: str = "rust async") -> SearchParams:
    return SearchParams(queries=[query], limit=10, options=SearchOptions(**options), now=NOW)


def sent(platform: Platform[Any], params: SearchParams) -> dict[str, Any]:
    """What the request carries: its query parameters, or its JSON body."""
    assert isinstance(platform, HttpPlatform)
    settings = platform.settings_for(params, platform.load_settings())
    spec = platform.build_request(params.queries, params, None, settings)
    if spec.params:
        return dict(spec.params)
    assert isinstance(spec.json, dict)
    return dict(spec.json)


def lookup(data: Any, path: str) -> Any:
    """`data` at a dotted path (`tools.0.web_search.x`), `ABSENT` where it has no such key."""
    for step in path.split("."):
        if isinstance(data, list) and step.isdigit() and int(step) < len(data):
            data = data[int(step)]
        elif isinstance(data, dict) and step in data:
            data = data[step]
        else:
            return ABSENT
    return data


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_request_carries_the_documented_parameters(case: Case) -> None:
    platform = case.make(BASE, **case.settings)
    params = search_params(case.options, case.query)
    request = sent(platform, params)
    assert {key: lookup(request, key) for key in case.sent} == case.sent
    native = platform.native_options(params.options, platform.load_settings())
    assert native == case.native
    assert native <= params.options.given() and native <= type(platform).native


def test_arxiv_time_range_counts_back_from_the_search_time_in_gmt() -> None:
    """A search whose time carries an offset still asks arXiv for GMT minutes."""
    local = datetime.fromisoformat("2025-06-15T14:30:00+02:00")
    params = SearchParams(
        queries=["q"], limit=5, options=SearchOptions(time_range="day"), now=local
    )
    query = sent(cases._arxiv(BASE), params)["search_query"]
    assert query == "all:q AND submittedDate:[202506141230 TO 202506151230]"


@pytest.mark.parametrize("engine", ["docs", "vectors", "wikipedia", "web_search_mcp"])
def test_platforms_without_provider_parameters_claim_nothing(engine: str) -> None:
    options = SearchOptions(
        include_domains=["example.org"],
        exclude_domains=["x.example.org"],
        time_range="week",
        country="DE",
        safesearch="strict",
    )
    platform = load_engine(engine)
    assert platform.native == frozenset()
    assert platform.native_options(options, None) == frozenset()


def test_wikipedia_request_ignores_the_options() -> None:
    platform = cases._wikipedia(BASE)
    plain = sent(platform, search_params({}))
    options = {"include_domains": ["wikipedia.org"], "time_range": "week", "country": "DE"}
    assert sent(platform, search_params(options)) == plain


def test_perplexity_over_its_cap_sends_no_filter_and_claims_nothing() -> None:
    domains = [f"d{i}.example" for i in range(21)]
    platform = cases._perplexity(BASE, search_domain_filter=["env.org"])
    params = search_params({"exclude_domains": domains})
    assert "search_domain_filter" not in sent(platform, params)
    assert platform.native_options(params.options, platform.load_settings()) == frozenset()


def test_builtin_claims_what_its_flavor_applies_whatever_its_fallback_would() -> None:
    """Its fallback (perplexity, the deployment's default chain) is a chain member with a run
    of its own, whose post-filter sees its own results: builtin claims its flavor's options."""
    options = SearchOptions(
        include_domains=["a.example", "b.example"], time_range="week", country="DE"
    )
    own = glm(BASE)  # GLM takes one domain: only the week is its own
    assert own.native_options(options, own.load_settings()) == {T}
