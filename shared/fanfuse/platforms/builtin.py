"""`builtin`: an LLM's own web search (Qwen on DashScope, GLM) through an OpenAI-compatible chat.

Written from Alibaba Cloud Model Studio's "Web search" guide for Qwen (help.aliyun.com,
model-studio "web-search": OpenAI-compatible `POST {base}/chat/completions` with
`enable_search: true` and `search_options: {enable_source: true, ...}`; the sources come back in
`search_info.search_results[]` as `{index, title, url, site_name}` and the answer cites them as
`[ref_N]` / `[N]`) and Zhipu's GLM "Web Search tool" docs (open.bigmodel.cn: `tools: [{type:
"web_search", web_search: {enable: true, search_result: true}}]`, sources in `web_search[]` as
`{title, link, content, media, refer, publish_date}`). Providers that return only `citations`
(a list of URLs) or Markdown links in the answer are read too.

The answer is kept as the summary (on each hit, `metadata.answer`); the sources become the hits.
The design it grew from falls back to `perplexity` when this platform is not configured or its
call fails: that is the deployment's default fallback chain (`Settings.chains`:
`builtin|perplexity`, wire/selection.py, service/chains.py), which says on the platform document
which member answered and why the other did not; this module knows no other platform.

Request options: GLM's `web_search` tool takes `search_domain_filter` (one domain, a string) and
`search_recency_filter` (`oneDay`/`oneWeek`/`oneMonth`/`oneYear`); Qwen's `search_options` take
`assigned_site_list` (at most 25 sites) and `freshness` in days (7, 30, 180 or 365, so a day is
not representable). Neither has an exclusion list, a country or a safe-search level. (The GLM
fields are in Zhipu's chat and Web Search API references; the Qwen ones were read from DashScope
clients quoting Model Studio's guide, whose stored copies did not show them: re-check there.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import SecretStr

from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.contract import PlatformContext, SearchParams
from fanfuse.platforms.http_api import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.parsing import as_str, bearer, load_json, parse_date, require
from fanfuse.wire.errors import ProviderError
from fanfuse.wire.models import Hit
from fanfuse.wire.options import OptionName, SearchOptions, TimeRange

ANSWER_CHARS = 2000
MD_LINK = re.compile(r"\[([^\]]{1,300})\]\((https?://[^)\s]+)\)")
BARE_URL = re.compile(r"https?://[^\s)\]>\"'\uff0c\u3002]+")
SYSTEM_PROMPT = "Search the web and answer with the sources you used, citing them."
GLM_RECENCY = {
    TimeRange.DAY: "oneDay",
    TimeRange.WEEK: "oneWeek",
    TimeRange.MONTH: "oneMonth",
    TimeRange.YEAR: "oneYear",
}
QWEN_FRESHNESS = {TimeRange.WEEK: 7, TimeRange.MONTH: 30, TimeRange.YEAR: 365}
QWEN_MAX_SITES = 25


class BuiltinSettings(HttpSettings):
    api_key: SecretStr
    base_url: str = "https://dashscope.aliyuncs.com/compatible-mode/v1"
    model: str = "qwen-plus"
    flavor: Literal["auto", "qwen", "glm"] = "auto"
    """How search is switched on: `qwen` (enable_search), `glm` (web_search tool), `auto` by URL."""
    timeout: float = 60.0
    max_pages: int = 1


def flavor_of(settings: BuiltinSettings) -> str:
    if settings.flavor != "auto":
        return str(settings.flavor)
    where = f"{settings.base_url} {settings.model}".lower()
    return "glm" if ("bigmodel" in where or "glm" in where) else "qwen"


def search_filters(options: SearchOptions, flavor: str) -> dict[str, Any]:
    """The flavor's own search fields for the request's domains and time range."""
    found: dict[str, Any] = {}
    sites, time_range = options.include_domains, options.time_range
    if flavor == "glm":
        if len(sites) == 1:
            found["search_domain_filter"] = sites[0]
        if time_range is not None:
            found["search_recency_filter"] = GLM_RECENCY[time_range]
        return found
    if 0 < len(sites) <= QWEN_MAX_SITES:
        found["assigned_site_list"] = list(sites)
    if time_range in QWEN_FRESHNESS:
        found["freshness"] = QWEN_FRESHNESS[time_range]
    return found


def own_native(options: SearchOptions, flavor: str) -> frozenset[OptionName]:
    """The options `search_filters` maps for this flavor."""
    fields = search_filters(options, flavor)
    native = set()
    if {"search_domain_filter", "assigned_site_list"} & fields.keys():
        native.add(OptionName.INCLUDE_DOMAINS)
    if {"search_recency_filter", "freshness"} & fields.keys():
        native.add(OptionName.TIME_RANGE)
    return frozenset(native)


class BuiltinPlatform(HttpPlatform[BuiltinSettings]):
    name = "builtin"
    typical_latency_s = 10.0  # an LLM's own search tool, then its answer: the slowest kind
    description = "an LLM's built-in web search (Qwen/DashScope or GLM)"
    settings_model = BuiltinSettings
    endpoint = "/chat/completions"
    key_fields = ("api_key",)
    native = frozenset({OptionName.INCLUDE_DOMAINS, OptionName.TIME_RANGE})

    def native_options(
        self, options: SearchOptions, settings: BuiltinSettings
    ) -> frozenset[OptionName]:
        """What its flavor's search fields apply (`search_filters`)."""
        return own_native(options, flavor_of(settings)) & options.given()

    # -- the chat call ------------------------------------------------------------------------

    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: BuiltinSettings
    ) -> RequestSpec:
        body: dict[str, Any] = {
            "model": settings.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": queries[0]},
            ],
        }
        flavor = flavor_of(settings)
        filters = search_filters(params.options, flavor)
        if flavor == "glm":
            tool = {"enable": True, "search_result": True, **filters}
            body["tools"] = [{"type": "web_search", "web_search": tool}]
        else:
            body["enable_search"] = True
            body["search_options"] = {"enable_source": True, "forced_search": True, **filters}
        return RequestSpec(
            url=self.url(settings),
            method="POST",
            json=body,
            headers=bearer(settings.api_key),
        )

    def parse_response(self, resp: ProviderResponse[BuiltinSettings]) -> Page:
        data = require(self.name, load_json(self.name, resp.body), dict, "the body")
        choices = require(self.name, data.get("choices"), list, "`choices`")
        if not choices or not isinstance(choices[0], dict):
            raise ProviderError(self.name, "malformed response: no choice in the completion")
        message = require(self.name, choices[0].get("message"), dict, "`choices[0].message`")
        answer = as_str(message.get("content")).strip()
        provider = flavor_of(resp.settings)
        sources = citations(data, message, answer)
        meta = {"provider": provider, "answer": answer[:ANSWER_CHARS], "model": data.get("model")}
        hits = [
            Hit(
                title=title or url,
                url=url,
                snippet=snippet or cited_sentence(answer, index),
                published_at=parse_date(date),
                metadata={**meta, "citation": index},
            )
            for index, title, url, snippet, date in sources
        ]
        return Page(hits=hits)

    async def search(
        self, ctx: PlatformContext[BuiltinSettings], params: SearchParams
    ) -> list[list[Hit]]:
        lists = await super().search(ctx, params)
        ctx.record.provider = flavor_of(ctx.settings)
        return lists


Source = tuple[int, str, str, str, Any]


def citations(data: Mapping[str, Any], message: Mapping[str, Any], answer: str) -> list[Source]:
    """(index, title, url, snippet, date) of every source, in citation order, URLs unique."""
    found: list[Source] = []
    search_info = data.get("search_info")
    if isinstance(search_info, dict):  # Qwen / DashScope
        for i, item in enumerate(search_info.get("search_results") or [], 1):
            if isinstance(item, dict) and isinstance(item.get("url"), str):
                given = item.get("index")
                index = given if isinstance(given, int) else i
                title = as_str(item.get("title"))
                found.append((index, title, item["url"], "", None))
    for key in ("web_search",):  # GLM
        for i, item in enumerate(data.get(key) or [], 1):
            if isinstance(item, dict) and isinstance(item.get("link"), str):
                found.append(
                    (
                        i,
                        as_str(item.get("title")),
                        item["link"],
                        as_str(item.get("content")),
                        item.get("publish_date"),
                    )
                )
    for where in (data, message):  # Perplexity-style `citations: [url, ...]`
        for i, url in enumerate(where.get("citations") or [], 1):
            if isinstance(url, str):
                found.append((i, "", url, "", None))
    for i, match in enumerate(MD_LINK.finditer(answer), 1):  # Markdown links in the answer
        found.append((i, match.group(1), match.group(2), "", None))
    if not found:
        for i, url in enumerate(BARE_URL.findall(answer), 1):
            found.append((i, "", url.rstrip(".,;"), "", None))
    unique: dict[str, Source] = {}
    for source in found:
        unique.setdefault(source[2], source)
    return list(unique.values())


def cited_sentence(answer: str, index: int) -> str:
    """The sentence of the answer that cites source `index` (`[ref_3]`, `[3]`), if any."""
    for marker in (f"[ref_{index}]", f"[{index}]"):
        at = answer.find(marker)
        if at >= 0:
            start = max(answer.rfind(c, 0, at) for c in ".!?\n\u3002\uff01\uff1f") + 1
            return answer[start:at].strip()[:300]
    return ""
