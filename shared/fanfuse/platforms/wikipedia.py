"""`wikipedia`: Wikipedia article search through the MediaWiki Action API.

Written from MediaWiki's "API:Search" page (www.mediawiki.org/wiki/API:Search) and the
Wikimedia User-Agent policy (meta.wikimedia.org/wiki/User-Agent_policy): `GET
https://{lang}.wikipedia.org/w/api.php?action=query&list=search&srsearch&srlimit&sroffset&
format=json` answers `query.search[]` of `{title, pageid, snippet, timestamp, wordcount}`;
`snippet` is HTML with `<span class="searchmatch">` highlights (stripped here);
`continue.sroffset` is the next page. Errors come back as HTTP 200 with an `error` object.

`list=search` has no date, country or safe-search parameter, and every result is on the wiki's
own host, so no request option is native: domains and the time range are post-filtered, the
latter on `timestamp`, the article's last edit; country and safe search are not applied.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from pydantic import Field

from fanfuse.net.policy import RateLimit, concurrency_for
from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.contract import Platform, SearchParams
from fanfuse.platforms.http_api import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.parsing import as_str, load_json, parse_date, require, strip_html
from fanfuse.wire.errors import ProviderError
from fanfuse.wire.models import Hit

MAX_LIMIT = 500


RATE_LIMIT = RateLimit(
    "MediaWiki API etiquette: no hard read limit, requests in series", in_flight=1
)


class WikipediaSettings(HttpSettings):
    max_concurrency: int = Field(
        default=concurrency_for(RATE_LIMIT, Platform.typical_latency_s), ge=1
    )
    base_url: str = "https://{lang}.wikipedia.org"
    """`{lang}` becomes the request's language (or `language`)."""
    language: str = "en"
    user_agent: str
    """Required: Wikimedia's policy asks for a User-Agent with contact details
    (`fanfuse/0.1 (https://example.org; ops@example.org)`); keyless public APIs also join `all`
    only when a deployment opts in like this."""


def _lang(params: SearchParams, settings: Any) -> str:
    return (params.language or settings.language).split("-")[0].split("_")[0].lower()


class WikipediaPlatform(HttpPlatform[WikipediaSettings]):
    name = "wikipedia"
    rate_limit = RATE_LIMIT
    description = "Wikipedia articles (MediaWiki Action API search)"
    settings_model = WikipediaSettings
    page_size = MAX_LIMIT
    endpoint = "/w/api.php"

    def settings_for(self, params: SearchParams, settings: WikipediaSettings) -> WikipediaSettings:
        """The request's language picks the wiki, for the query and the article URLs alike."""
        return settings.model_copy(update={"language": _lang(params, settings)})

    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: WikipediaSettings
    ) -> RequestSpec:
        query: list[tuple[str, str | int | float]] = [
            ("action", "query"),
            ("list", "search"),
            ("srsearch", queries[0]),
            ("srlimit", max(1, min(params.limit, MAX_LIMIT))),
            ("srprop", "snippet|timestamp|wordcount"),
            ("format", "json"),
            ("formatversion", 2),
        ]
        if page:
            query.append(("sroffset", int(page)))
        return RequestSpec(
            url=self.url(settings).replace("{lang}", settings.language),
            params=query,
            headers={"User-Agent": settings.user_agent},
        )

    def parse_response(self, resp: ProviderResponse[WikipediaSettings]) -> Page:
        data = require(self.name, load_json(self.name, resp.body), dict, "the body")
        if isinstance(data.get("error"), dict):
            err = data["error"]
            raise ProviderError(
                self.name, f"API error {as_str(err.get('code'))}: {as_str(err.get('info'))}"
            )
        query = require(self.name, data.get("query"), dict, "`query`")
        items = require(self.name, query.get("search", []), list, "`query.search`")
        wiki = article_base(self.url(resp.settings), resp.settings.language)
        hits = [
            Hit(
                title=as_str(item.get("title")),
                url=wiki + quote(as_str(item.get("title")).replace(" ", "_"), safe="/:()_,'"),
                snippet=strip_html(item.get("snippet")),
                published_at=parse_date(item.get("timestamp")),
                metadata={k: item[k] for k in ("pageid", "wordcount") if k in item},
            )
            for item in items
            if isinstance(item, dict) and item.get("title")
        ]
        cont = data.get("continue")
        offset = cont.get("sroffset") if isinstance(cont, dict) else None
        return Page(hits=hits, next_page=int(offset) if isinstance(offset, int) else None)


def article_base(api_url: str, language: str) -> str:
    """`https://en.wikipedia.org/wiki/` from the API URL (works for mirrors and tests too)."""
    api = api_url.replace("{lang}", language)
    root = api.split("/w/api.php")[0] if "/w/api.php" in api else api.rsplit("/", 1)[0]
    return f"{root}/wiki/"
