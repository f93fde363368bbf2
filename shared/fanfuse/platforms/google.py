"""`google`: Google Programmable Search through the Custom Search JSON API.

Written from Google's "Custom Search JSON API: Using REST" and the `cse.list` reference
(developers.google.com/custom-search/v1/using_rest, .../v1/reference/rest/v1/cse/list):
`GET https://www.googleapis.com/customsearch/v1?key&cx&q&num&start`, `num` at most 10, `start`
1-based, at most 100 results per query; results in `items[]`, absent when there are none. So
paging past 10 asks for start=1, 11, 21, ...; a bad key is a 400 whose reason says so.
"""

from __future__ import annotations

from pydantic import SecretStr

from fanfuse.errors import ProviderError
from fanfuse.models import Hit
from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.base import SearchParams
from fanfuse.platforms.http import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.parsing import as_str, error_detail, load_json, require, secret

PAGE_SIZE = 10
MAX_RESULTS = 100  # the API serves at most the first 100 results of a query


class GoogleSettings(HttpSettings):
    api_key: SecretStr
    cx: str
    """The Programmable Search Engine id."""
    base_url: str = "https://www.googleapis.com"
    safe: str | None = None
    max_pages: int = 10


class GooglePlatform(HttpPlatform[GoogleSettings]):
    name = "google"
    description = "Google Programmable Search (Custom Search JSON API)"
    settings_model = GoogleSettings
    endpoint = "/customsearch/v1"
    key_fields = ("api_key",)

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
        if settings.safe:
            query.append(("safe", settings.safe))
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
