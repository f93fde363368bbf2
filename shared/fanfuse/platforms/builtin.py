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
When this platform is not configured, or its call fails, it falls back to `perplexity` (if that
is configured) and says so: `provider` on every hit's metadata and on the platform document.

Request options: GLM's `web_search` tool takes `search_domain_filter` (one domain, a string) and
`search_recency_filter` (`oneDay`/`oneWeek`/`oneMonth`/`oneYear`); Qwen's `search_options` take
`assigned_site_list` (at most 25 sites) and `freshness` in days (7, 30, 180 or 365, so a day is
not representable). Neither has an exclusion list, a country or a safe-search level. (The GLM
fields are in Zhipu's chat and Web Search API references; the Qwen ones were read from DashScope
clients quoting Model Studio's guide, whose stored copies did not show them: re-check there.)
Since a call may be answered by the fallback, an option counts as native only when both the own
flavor and the fallback apply it (only the fallback's, when no key is set): under-claiming merely
post-filters dated results once more, over-claiming would let old ones through.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import SecretStr, ValidationError

from fanfuse.net.runner import RequestSpec
from fanfuse.platforms.base import PlatformContext, SearchParams
from fanfuse.platforms.http import HttpPlatform, HttpSettings, Page, PageToken, ProviderResponse
from fanfuse.platforms.parsing import as_str, bearer, load_json, parse_date, require
from fanfuse.settings import Price
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
    api_key: SecretStr | None = None
    base_url: str = "https://dashscope.aliyuncs.com/compatible-mode/v1"
    model: str = "qwen-plus"
    flavor: Literal["auto", "qwen", "glm"] = "auto"
    """How search is switched on: `qwen` (enable_search), `glm` (web_search tool), `auto` by URL."""
    fallback: str | None = "perplexity"
    """The platform used when this one is not configured or fails; None disables it."""
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
    description = "an LLM's built-in web search (Qwen/DashScope or GLM), falling back to perplexity"
    settings_model = BuiltinSettings
    endpoint = "/chat/completions"
    key_fields = ("api_key",)
    native = frozenset({OptionName.INCLUDE_DOMAINS, OptionName.TIME_RANGE})

    # -- price: its own provider's (token-billed: 0 unless set), or its fallback's ---------

    def price(self, settings: BuiltinSettings | None) -> Price:
        """Qwen and GLM bill their search by tokens, with no list price per call: 0 unless the
        deployment sets one (`Settings.prices`, docs/platforms.md). With no key of its own,
        every call is the fallback's, at the fallback's list price."""
        if settings is not None and settings.api_key is not None:
            return self.list_price
        fallback = self._fallback()
        return self.list_price if fallback is None else self._fallback_price(fallback)

    @staticmethod
    def _fallback_price(fallback: HttpPlatform[HttpSettings]) -> Price:
        try:
            return fallback.price(fallback.settings())
        except ValidationError:
            return fallback.price(None)

    # -- availability: configured itself, or through its fallback --------------------------

    def _fallback(self) -> HttpPlatform[HttpSettings] | None:
        try:
            name = self.settings().fallback
        except ValidationError:
            return None
        if not name or name == self.name:
            return None
        from fanfuse.platforms import load_engine

        platform = load_engine(name)
        return platform if isinstance(platform, HttpPlatform) else None

    def availability(self) -> str | None:
        own = super().availability()
        settings = self.settings() if own is None else None
        if settings is not None and settings.api_key is not None:
            return None
        why = own or f"missing settings: {self.settings_env_name('api_key')}"
        fallback = self._fallback()
        if fallback is None:
            return f"{why} (no fallback)"
        fallback_why = fallback.availability()
        if fallback_why is None:
            return None
        return f"{why}; fallback {fallback.name}: {fallback_why}"

    def native_options(
        self, options: SearchOptions, settings: BuiltinSettings
    ) -> frozenset[OptionName]:
        """What both possible answerers apply (see the module docstring)."""
        fallback = self._fallback()
        theirs = None
        if fallback is not None and fallback.availability() is None:
            theirs = fallback.native_options(options, fallback.settings())
        if settings.api_key is None:
            return theirs if theirs is not None else frozenset()
        ours = own_native(options, flavor_of(settings)) & options.given()
        return ours & theirs if theirs is not None else ours

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

    # -- search with the fallback -------------------------------------------------------------

    async def search(
        self, ctx: PlatformContext[BuiltinSettings], params: SearchParams
    ) -> list[list[Hit]]:
        settings = ctx.settings
        reason = None
        if settings.api_key is not None:
            try:
                lists = await super().search(ctx, params)
                ctx.record.provider = flavor_of(settings)
                return lists
            except ProviderError as exc:
                reason = f"{self.name} failed: {exc.message}"
        else:
            reason = f"{self.name} not configured ({self.settings_env_name('api_key')} unset)"
        fallback = self._fallback()
        if fallback is None or fallback.availability() is not None:
            why = "no fallback configured" if fallback is None else fallback.availability()
            raise ProviderError(self.name, f"{reason}; {why}")
        sub_ctx = PlatformContext(
            settings=fallback.settings(),
            runner=ctx.runner,
            record=ctx.record,
            report=ctx.report,
            addresses=ctx.addresses,
            resolver=ctx.resolver,
            call_budget=ctx.call_budget,  # the fallback's calls are the same search's
            # its price: the run's when all its calls are the fallback's (`price`), else the
            # fallback's list price (a deployment's override names the run's platform)
            price=ctx.price if settings.api_key is None else self._fallback_price(fallback),
            cost_budget=ctx.cost_budget,
            hold=ctx.hold,  # counted before they are sent, as the run's own
        )
        lists = await fallback.search(sub_ctx, params)
        ctx.record.provider = fallback.name
        return [
            [
                h.model_copy(
                    update={
                        "metadata": {
                            **h.metadata,
                            "provider": fallback.name,
                            "fallback_reason": reason,
                        }
                    }
                )
                for h in hits
            ]
            for hits in lists
        ]


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
