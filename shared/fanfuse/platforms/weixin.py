"""`weixin`: WeChat public-account articles through Sogou's weixin search pages.

There is no API: `GET https://weixin.sogou.com/weixin?type=2&query&ie=utf8&page=N` answers
server-rendered HTML (10 articles a page, `ul.news-list > li`, title link in `.txt-box h3 a`,
summary in `p.txt-info`, account in `.all-time-y2` or `a.account`, the Unix time in `.s-p[t]`),
parsed with selectolax. Written from the structure those pages have (as documented by the
open-source clients that read them, e.g. wechatsogou) and PROVIDERS.md's notes.

Result links are Sogou redirects (`/link?url=...`) whose page assembles the real
`mp.weixin.qq.com` address in an inline script (`url += '...'` pieces); `resolve_target` reads it
during the resolving stage. Sogou guards itself: a redirect to its `antispider` page or a captcha
form means this client is blocked for a while. That is raised as `errors.Blocked`, which opens
the platform's shared breaker for an hour (breaker.py), so no instance hammers Sogou meanwhile.

A time range is sent as the page's own time filter, `tsn` (1 a day, 2 a week, 3 a month, 4 a
year, with empty `ft`/`et`, as wechatsogou builds it), but declared not native: these pages are
not an API and SearXNG's sogou_wechat engine has no time filter to confirm it, while every
article carries its date, so the post-filter enforces the range exactly. Domains are
post-filtered too, on the Sogou link URLs the search stage sees (their real `mp.weixin.qq.com`
target is known only after resolving); country and safe search are not applied.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin, urlsplit

from pydantic import Field, field_validator

from fanfuse.net.policy import RateLimit, concurrency_for
from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.contract import Capabilities, SearchParams
from fanfuse.platforms.http_api import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.wire.errors import Blocked, ProviderError
from fanfuse.wire.models import Hit
from fanfuse.wire.options import TimeRange

PAGE_SIZE = 10
URL_PIECE = re.compile(r"url\s*\+=\s*'([^']*)'")
TIME_CONVERT = re.compile(r"timeConvert\('(\d{9,11})'\)")
NO_RESULTS = ("noresult_part1_container", "no-sosuo", "没有找到相关的微信公众号文章")
BLOCKED = ("antispider", "seccodeForm", "seccodeImage")
TSN = {TimeRange.DAY: 1, TimeRange.WEEK: 2, TimeRange.MONTH: 3, TimeRange.YEAR: 4}


TYPICAL_LATENCY_S = 5.0  # Sogou's page, then one redirect per article to resolve
RATE_LIMIT = RateLimit(
    "Sogou: none documented; a guarded site, scraped one call a second", per_second=1.0, in_flight=1
)


class WeixinSettings(HttpSettings):
    max_concurrency: int = Field(default=concurrency_for(RATE_LIMIT, TYPICAL_LATENCY_S), ge=1)
    enabled: bool
    """Scrapes a public site: joins `all` only when a deployment opts in."""
    base_url: str = "https://weixin.sogou.com"
    user_agent: str = (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/124.0 Safari/537.36"
    )
    min_interval: float = 1.0
    max_pages: int = 3

    @field_validator("enabled")
    @classmethod
    def _opted_in(cls, value: bool) -> bool:
        if not value:
            raise ValueError("weixin is disabled")
        return value


class WeixinPlatform(HttpPlatform[WeixinSettings]):
    name = "weixin"
    rate_limit = RATE_LIMIT
    typical_latency_s = TYPICAL_LATENCY_S
    description = "WeChat public-account articles (Sogou weixin search)"
    settings_model = WeixinSettings
    page_size = PAGE_SIZE
    endpoint = "/weixin"
    capabilities = Capabilities(resolves_urls=True)
    uses_strategy = True

    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: WeixinSettings
    ) -> RequestSpec:
        query: list[tuple[str, str | int | float]] = [
            ("type", 2),
            ("query", queries[0]),
            ("ie", "utf8"),
            ("page", int(page or 1)),
        ]
        if params.options.time_range is not None:  # a hint; the post-filter enforces the range
            query += [("tsn", TSN[params.options.time_range]), ("ft", ""), ("et", "")]
        return RequestSpec(
            url=self.url(settings),
            params=query,
            headers={"User-Agent": settings.user_agent, "Accept": "text/html"},
            follow_redirects=False,  # a redirect is how Sogou says "blocked"
        )

    def check_response(self, resp: ProviderResponse[WeixinSettings]) -> None:
        location = resp.headers.get("location", "")
        head = resp.body[:20_000].decode("utf-8", errors="replace")
        if (300 <= resp.status < 400 and "antispider" in location) or (
            resp.status == 200 and any(mark in head for mark in BLOCKED)
        ):
            raise Blocked(
                self.name,
                "blocked by Sogou's anti-spider check (captcha)",
            )
        super().check_response(resp)

    def parse_response(self, resp: ProviderResponse[WeixinSettings]) -> Page:
        from selectolax.lexbor import LexborHTMLParser

        html = resp.body.decode("utf-8", errors="replace")
        page_url = self.url(resp.settings)
        tree = LexborHTMLParser(html)
        items = tree.css("ul.news-list > li")
        if not items:
            if any(mark in html for mark in NO_RESULTS):
                return Page(hits=[])
            raise ProviderError(
                self.name, "malformed response: no result list (ul.news-list) in the page"
            )
        hits: list[Hit] = []
        for item in items:
            link = item.css_first(".txt-box h3 a")
            href = link.attributes.get("href") if link is not None else None
            if link is None or not href:
                continue
            summary = item.css_first("p.txt-info")
            account = item.css_first(".all-time-y2") or item.css_first("a.account")
            meta: dict[str, Any] = {"sogou_url": urljoin(page_url, href)}
            if account is not None:
                meta["account"] = " ".join(account.text().split())
            hits.append(
                Hit(
                    title=" ".join(link.text().split()),
                    url=urljoin(page_url, href),
                    snippet=" ".join(summary.text().split()) if summary is not None else "",
                    published_at=_published(item),
                    language="zh",
                    metadata=meta,
                )
            )
        current = int(resp.page or 1)
        has_next = tree.css_first("#sogou_next") is not None or len(items) >= PAGE_SIZE
        return Page(hits=hits, next_page=current + 1 if hits and has_next else None)

    def resolve_target(self, url: str, body: bytes) -> str | None:
        """The `mp.weixin.qq.com` URL a Sogou `/link` page assembles in its script."""
        pieces = URL_PIECE.findall(body.decode("utf-8", errors="replace"))
        if not pieces:
            return None
        target = "".join(pieces).replace("@", "")
        host = urlsplit(target).hostname or ""
        return target if host == "weixin.qq.com" or host.endswith(".weixin.qq.com") else None


def _published(item: Any) -> datetime | None:
    stamp = None
    box = item.css_first(".s-p")
    if box is not None and (box.attributes.get("t") or "").isdigit():
        stamp = box.attributes.get("t")
    if stamp is None:
        found = TIME_CONVERT.search(item.html or "")
        stamp = found.group(1) if found else None
    return datetime.fromtimestamp(int(stamp), UTC) if stamp else None
