"""`arxiv`: arXiv's search API (Atom 1.0), parsed with an XML parser.

Written from the "arXiv API User's Manual" (info.arxiv.org/help/api/user-manual.html):
`GET http://export.arxiv.org/api/query?search_query&start&max_results&sortBy&sortOrder` answers
an Atom feed whose `entry` elements carry `id`, `title`, `summary`, `published`, `updated`,
`author/name`, `link` (rel alternate, title pdf) and `arxiv:primary_category`, with
`opensearch:totalResults` for paging. The manual asks for no more than one call every 3 seconds,
hence the default `min_interval`. A bad query comes back as a feed with one `Error` entry.

A time range is native: the manual's query syntax has `submittedDate:[YYYYMMDDTTTT TO
YYYYMMDDTTTT]` (GMT, to the minute), ANDed to the search terms from the range's start to the
search's time. Every result is on arxiv.org, so domains are post-filtered; there is no country or
safe-search parameter.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from pydantic import Field, field_validator

from fanfuse.net.policy import RateLimit, concurrency_for
from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.contract import Platform, SearchParams
from fanfuse.platforms.http_api import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.native import now_utc, since
from fanfuse.platforms.parsing import parse_date
from fanfuse.wire.errors import ProviderError
from fanfuse.wire.models import Hit
from fanfuse.wire.options import OptionName

NS = {
    "atom": "http://www.w3.org/2005/Atom",
    "opensearch": "http://a9.com/-/spec/opensearch/1.1/",
    "arxiv": "http://arxiv.org/schemas/atom",
}
PAGE_SIZE = 50


RATE_LIMIT = RateLimit(
    "arXiv API terms: one request every 3 seconds, one connection at a time",
    per_second=1 / 3,
    in_flight=1,
)


class ArxivSettings(HttpSettings):
    max_concurrency: int = Field(
        default=concurrency_for(RATE_LIMIT, Platform.typical_latency_s), ge=1
    )
    enabled: bool
    """Keyless public API: it joins `all` only when a deployment opts in (`..._ENABLED=true`),
    so a default install never sends queries to a third party unasked."""
    base_url: str = "http://export.arxiv.org"
    field: str = "all"
    """The search field prefix (`all`, `ti`, `abs`, `au`, `cat`...)."""
    sort_by: str = "relevance"
    min_interval: float = 3.0

    @field_validator("enabled")
    @classmethod
    def _opted_in(cls, value: bool) -> bool:
        if not value:
            raise ValueError("arxiv is disabled")
        return value


def _text(node: ET.Element | None) -> str:
    return " ".join((node.text or "").split()) if node is not None else ""


class ArxivPlatform(HttpPlatform[ArxivSettings]):
    name = "arxiv"
    rate_limit = RATE_LIMIT
    description = "arXiv papers (Atom search API)"
    settings_model = ArxivSettings
    page_size = PAGE_SIZE
    endpoint = "/api/query"
    native = frozenset({OptionName.TIME_RANGE})

    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: ArxivSettings
    ) -> RequestSpec:
        start = int(page or 0)
        terms = " AND ".join(f"{settings.field}:{word}" for word in queries[0].split())
        start_date = since(params)
        if start_date is not None:
            span = f"{start_date:%Y%m%d%H%M} TO {now_utc(params):%Y%m%d%H%M}"
            terms += f" AND submittedDate:[{span}]"
        return RequestSpec(
            url=self.url(settings),
            params=[
                ("search_query", terms),
                ("start", start),
                ("max_results", max(1, min(params.limit - start, PAGE_SIZE))),
                ("sortBy", settings.sort_by),
                ("sortOrder", "descending"),
            ],
        )

    def parse_response(self, resp: ProviderResponse[ArxivSettings]) -> Page:
        try:
            feed = ET.fromstring(resp.body)
        except ET.ParseError as exc:
            raise ProviderError(self.name, f"malformed response: not an Atom feed ({exc})") from exc
        if feed.tag != f"{{{NS['atom']}}}feed":
            raise ProviderError(self.name, f"malformed response: root element is {feed.tag!r}")
        entries = feed.findall("atom:entry", NS)
        hits: list[Hit] = []
        for entry in entries:
            title = _text(entry.find("atom:title", NS))
            entry_id = _text(entry.find("atom:id", NS))
            if title == "Error" and "api/errors" in entry_id:
                raise ProviderError(
                    self.name, f"query rejected: {_text(entry.find('atom:summary', NS))}"
                )
            url = entry_id
            pdf = None
            for link in entry.findall("atom:link", NS):
                if link.get("rel") == "alternate" and link.get("href"):
                    url = link.get("href", url)
                if link.get("title") == "pdf":
                    pdf = link.get("href")
            if not url:
                continue
            category = entry.find("arxiv:primary_category", NS)
            authors = [_text(a.find("atom:name", NS)) for a in entry.findall("atom:author", NS)]
            hits.append(
                Hit(
                    title=title,
                    url=url,
                    snippet=_text(entry.find("atom:summary", NS)),
                    published_at=parse_date(_text(entry.find("atom:published", NS))),
                    metadata={
                        "authors": authors,
                        "pdf": pdf,
                        "primary_category": category.get("term") if category is not None else None,
                        "updated": _text(entry.find("atom:updated", NS)) or None,
                    },
                )
            )
        total = _text(feed.find("opensearch:totalResults", NS))
        following = int(resp.page or 0) + len(entries)
        more = total.isdigit() and following < int(total) and len(entries) > 0
        return Page(hits=hits, next_page=following if more else None)
