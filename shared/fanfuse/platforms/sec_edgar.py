"""`sec_edgar`: SEC EDGAR full-text search over filings since 2001.

Written from SEC's "EDGAR Full Text Search" help (efts.sec.gov/LATEST/search-index, used by
www.sec.gov/edgar/search; the JSON API is not formally documented, so the parser is strict about
what it needs and lenient about the rest) and SEC's "Accessing EDGAR Data" fair-access policy
(www.sec.gov/os/accessing-edgar-data): every request must carry a User-Agent naming the
organisation and a contact e-mail, and no client may exceed 10 requests per second.
`GET .../search-index?q&forms&startdt&enddt&from` answers Elasticsearch-style `hits.hits[]` with
`_id` (`{adsh}:{file name}`) and `_source.{ciks, display_names, form, file_date, adsh,
file_description}`; pages are 100 hits (`from` is a hit offset).

A time range is native, as the search page's custom date range (`dateRange=custom`, `startdt`
and `enddt` as `YYYY-MM-DD`, from the range's start to the search's day); it overrides
`FANFUSE_SEC_EDGAR_STARTDT` / `_ENDDT`, which stay the defaults. Every filing is on
www.sec.gov, so domains are post-filtered; there is no country (the search's location filter is
a filer's address, not a search region) or safe-search parameter.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from fanfuse.net.policy import RateLimit, concurrency_for
from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.contract import Platform, SearchParams
from fanfuse.platforms.http_api import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.native import now_utc, since
from fanfuse.platforms.parsing import as_str, load_json, parse_date, require
from fanfuse.wire.models import Hit
from fanfuse.wire.options import OptionName

PAGE_SIZE = 100
ARCHIVES = "https://www.sec.gov/Archives/edgar/data"


RATE_LIMIT = RateLimit("SEC fair access: 10 requests a second", per_second=10.0)


class SecEdgarSettings(HttpSettings):
    max_concurrency: int = Field(
        default=concurrency_for(RATE_LIMIT, Platform.typical_latency_s), ge=1
    )
    user_agent: str
    """SEC requires `Organisation contact@example.com`; requests without it are refused."""
    base_url: str = "https://efts.sec.gov"
    forms: str | None = None
    """Comma-separated form types, e.g. `10-K,10-Q`."""
    startdt: str | None = None
    enddt: str | None = None
    min_interval: float = 0.1  # 10 requests per second, SEC's fair-access limit

    @field_validator("user_agent")
    @classmethod
    def _contact(cls, value: str) -> str:
        if "@" not in value:
            raise ValueError("SEC requires a User-Agent with a contact e-mail address")
        return value


class SecEdgarPlatform(HttpPlatform[SecEdgarSettings]):
    name = "sec_edgar"
    rate_limit = RATE_LIMIT
    description = "SEC EDGAR full-text search of company filings"
    settings_model = SecEdgarSettings
    page_size = PAGE_SIZE
    endpoint = "/LATEST/search-index"
    native = frozenset({OptionName.TIME_RANGE})

    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: SecEdgarSettings
    ) -> RequestSpec:
        query: list[tuple[str, str | int | float]] = [("q", queries[0])]
        if settings.forms:
            query.append(("forms", settings.forms))
        start, end = settings.startdt, settings.enddt
        start_date = since(params)
        if start_date is not None:
            start, end = start_date.date().isoformat(), now_utc(params).date().isoformat()
        if start and end:
            query += [("dateRange", "custom"), ("startdt", start), ("enddt", end)]
        if page:
            query.append(("from", int(page)))
        return RequestSpec(
            url=self.url(settings),
            params=query,
            headers={"User-Agent": settings.user_agent, "Accept": "application/json"},
        )

    def parse_response(self, resp: ProviderResponse[SecEdgarSettings]) -> Page:
        data = require(self.name, load_json(self.name, resp.body), dict, "the body")
        outer = require(self.name, data.get("hits"), dict, "`hits`")
        items = require(self.name, outer.get("hits", []), list, "`hits.hits`")
        hits = [h for item in items if (h := filing_hit(item)) is not None]
        total = outer.get("total", {})
        total_n = total.get("value") if isinstance(total, dict) else total
        following = int(resp.page or 0) + len(items)
        more = isinstance(total_n, int) and following < total_n and len(items) > 0
        return Page(hits=hits, next_page=following if more else None)


def filing_hit(item: Any) -> Hit | None:
    """One filing document as a hit; its URL is the document in EDGAR's archives."""
    if not isinstance(item, dict) or not isinstance(item.get("_source"), dict):
        return None
    src = item["_source"]
    adsh = as_str(src.get("adsh")) or as_str(item.get("_id")).split(":")[0]
    ciks = src.get("ciks") or []
    if not adsh or not ciks:
        return None
    cik = str(ciks[0]).lstrip("0") or "0"
    folder = f"{ARCHIVES}/{cik}/{adsh.replace('-', '')}"
    _, _, filename = as_str(item.get("_id")).partition(":")
    url = f"{folder}/{filename}" if filename else f"{folder}/{adsh}-index.htm"
    names = src.get("display_names") or []
    company = as_str(names[0]) if names else f"CIK {cik}"
    form = as_str(src.get("form") or src.get("root_form"))
    date = as_str(src.get("file_date"))
    description = as_str(src.get("file_description"))
    return Hit(
        title=f"{company}: {form} ({date})" if form else company,
        url=url,
        snippet=" - ".join(p for p in (description, as_str(src.get("file_type"))) if p),
        published_at=parse_date(date),
        metadata={
            "cik": cik,
            "adsh": adsh,
            "form": form,
            "filing_index": f"{folder}/{adsh}-index.htm",
        },
    )
