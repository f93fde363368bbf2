"""`web_search_mcp`: a web-search MCP server as a platform, through the `mcp` SDK.

Written from the Model Context Protocol specification's "Tools" section
(modelcontextprotocol.io/specification, `tools/call` answering `content[]` items of type `text`,
`structuredContent`, `isError`) and the `mcp` Python SDK (client sessions over stdio or streamable
HTTP), for servers such as the open-source `web-search-mcp`, whose tools are `full-web-search`
(query, limit, includeContent), `get-web-search-summaries` (query, limit) and
`get-single-web-page-content` (url, maxContentLength). Their answers are parsed whether they are
JSON (`{"results": [{title, url, description, fullContent}]}`) or the numbered text blocks those
servers print (`**1. Title**`, `URL: ...`, `Description: ...`, `**Full Content:**`).

Not one HTTP call, so it implements `search` itself. When content is wanted it asks for full
content and then fetches up to `targeted_fetches` results that still lack it with
`get-single-web-page-content` (the query strategy's targeted fetches).

The server fetches pages from wherever it runs, often beside fanfuse, so every result URL is
put through the network guard first, with the deployment's address policy and resolver (the
context's), exactly as fanfuse's own page fetches are: a URL the guard refuses is never handed to
the page tool, and content the search tool already brought for it is not passed on (the server
fetched it without asking; fanfuse does not hand it on). Either way the result keeps its reason in
`metadata.fetch_error` and the search goes on. The guard checks the name as it resolves now; the
server looks it up again itself, so a rebinding DNS answer is beyond what a check here can stop
(run the server where it can reach nothing private).
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fanfuse.platforms.contract import Platform, PlatformContext, PlatformSettings, SearchParams
from fanfuse.wire.errors import ProviderError, Refused
from fanfuse.wire.models import CallRecord, Hit

if TYPE_CHECKING:
    from mcp import ClientSession

BLOCK = re.compile(r"^\*\*(\d+)\.\s*(.+?)\*\*\s*$", re.MULTILINE)
FIELD = re.compile(r"^(URL|Description|Snippet):\s*(.*)$", re.MULTILINE)
CONTENT_MARK = "**Full Content:**"


class WebSearchMcpSettings(PlatformSettings):
    url: str | None = None
    """A streamable-HTTP MCP endpoint (`http://host:port/mcp`)."""
    command: str | None = None
    """Or a command line that starts the server on stdio (`npx web-search-mcp`)."""
    search_tool: str = "full-web-search"
    summary_tool: str = "get-web-search-summaries"
    page_tool: str = "get-single-web-page-content"
    timeout: float = 60.0
    targeted_fetches: int = 3
    max_content_chars: int = 20_000


def parse_results(payload: str) -> list[dict[str, str]]:
    """Results from one text content item: JSON, or the servers' numbered text blocks."""
    text = payload.strip()
    if text.startswith(("{", "[")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if data is not None:
            return _from_json(data)
    marks = list(BLOCK.finditer(text))
    found: list[dict[str, str]] = []
    for i, mark in enumerate(marks):
        block = text[mark.end() : marks[i + 1].start() if i + 1 < len(marks) else len(text)]
        head, _, content = block.partition(CONTENT_MARK)
        fields = {name.lower(): value.strip() for name, value in FIELD.findall(head)}
        if not fields.get("url"):
            continue
        body = content.strip().removesuffix("---").strip()
        found.append(
            {
                "title": mark.group(2).strip(),
                "url": fields["url"],
                "snippet": fields.get("description") or fields.get("snippet", ""),
                "content": body,
            }
        )
    return found


def _from_json(data: Any) -> list[dict[str, str]]:
    items = data.get("results", []) if isinstance(data, dict) else data
    out = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("url"), str):
            out.append(
                {
                    "title": str(item.get("title") or ""),
                    "url": item["url"],
                    "snippet": str(item.get("description") or item.get("snippet") or ""),
                    "content": str(item.get("fullContent") or item.get("content") or ""),
                }
            )
    return out


class WebSearchMcpPlatform(Platform[WebSearchMcpSettings]):
    name = "web_search_mcp"
    typical_latency_s = 4.0  # an MCP server that itself scrapes a search engine
    description = "a web-search MCP server (full-web-search and friends) over stdio or HTTP"
    settings_model = WebSearchMcpSettings

    def availability(self) -> str | None:
        own = super().availability()
        if own is not None:
            return own
        settings = self.settings()
        if not settings.url and not settings.command:
            url, command = self.settings_env_name("url"), self.settings_env_name("command")
            return f"missing settings: {url} or {command}"
        return None

    @asynccontextmanager
    async def session(self, settings: WebSearchMcpSettings) -> AsyncIterator[ClientSession]:
        """An initialized MCP client session to the configured server."""
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client

        if settings.url:
            transport: Any = streamable_http_client(settings.url)
        elif settings.command:
            argv = shlex.split(settings.command)
            transport = stdio_client(StdioServerParameters(command=argv[0], args=argv[1:]))
        else:
            raise ProviderError(self.name, self.availability() or "not configured")
        async with transport as streams, ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            yield session

    async def call(
        self,
        session: ClientSession,
        ctx: PlatformContext[WebSearchMcpSettings],
        tool: str,
        arguments: dict[str, Any],
    ) -> list[dict[str, str]]:
        """Call one tool, record it, and parse its results."""
        from mcp.types import TextContent

        started = time.monotonic()
        record = CallRecord(platform=self.name, tool=tool, attempts=1)
        try:
            result = await session.call_tool(tool, arguments)
        except Exception as exc:
            record.error = str(exc)[:200]
            raise ProviderError(self.name, f"tool {tool} failed: {exc}") from exc
        finally:
            record.seconds = round(time.monotonic() - started, 4)
            ctx.record.calls.append(record)
        texts = [c.text for c in result.content if isinstance(c, TextContent)]
        if result.is_error:
            record.error = " ".join(texts)[:200]
            raise ProviderError(self.name, f"tool {tool} reported an error: {' '.join(texts)}")
        found = _from_json(result.structured_content) if result.structured_content else []
        for text in texts if not found else []:
            found.extend(parse_results(text))
        return found

    async def search(
        self, ctx: PlatformContext[WebSearchMcpSettings], params: SearchParams
    ) -> list[list[Hit]]:
        settings = ctx.settings
        try:
            async with asyncio.timeout(settings.timeout), self.session(settings) as session:
                lists = []
                for i, query in enumerate(params.queries, 1):
                    lists.append(await self._one(session, ctx, query, params))
                    ctx.report(i, len(params.queries), f"{i}/{len(params.queries)} queries")
                return lists
        except TimeoutError as exc:
            raise ProviderError(self.name, f"timed out after {settings.timeout:g}s") from exc
        except ProviderError:
            raise
        except (OSError, RuntimeError, ExceptionGroup) as exc:
            raise ProviderError(self.name, f"could not talk to the MCP server: {exc!r}") from exc

    async def _one(
        self,
        session: ClientSession,
        ctx: PlatformContext[WebSearchMcpSettings],
        query: str,
        params: SearchParams,
    ) -> list[Hit]:
        settings = ctx.settings
        if params.include_content:
            args = {"query": query, "limit": params.limit, "includeContent": True}
            found = await self.call(session, ctx, settings.search_tool, args)
        else:
            args = {"query": query, "limit": params.limit}
            found = await self.call(session, ctx, settings.summary_tool, args)
        hits = [
            Hit(
                title=item["title"],
                url=item["url"],
                snippet=item["snippet"],
                content=(item["content"] or None) if params.include_content else None,
                metadata={
                    "tool": settings.search_tool
                    if params.include_content
                    else settings.summary_tool
                },
            )
            for item in found[: params.limit]
        ]
        if params.include_content:
            refused = await refusals(ctx, [h.url for h in hits])
            for i, reason in enumerate(refused):
                if reason is not None:
                    metadata = {**hits[i].metadata, "fetch_error": reason}
                    hits[i] = hits[i].model_copy(update={"content": None, "metadata": metadata})
            allowed = [i for i, reason in enumerate(refused) if reason is None]
            hits = await self._targeted_fetches(session, settings, hits, allowed)
        return hits

    async def _targeted_fetches(
        self,
        session: ClientSession,
        settings: WebSearchMcpSettings,
        hits: list[Hit],
        allowed: list[int],
    ) -> list[Hit]:
        """Fetch up to `targeted_fetches` pages that came back without content, among the hits
        at `allowed` (those whose URL the guard lets through)."""
        from mcp.types import TextContent

        lacking = [i for i in allowed if not hits[i].content][: settings.targeted_fetches]
        for i in lacking:
            args = {"url": hits[i].url, "maxContentLength": settings.max_content_chars}
            try:
                result = await session.call_tool(settings.page_tool, args)
            except Exception as exc:  # one page failing does not fail the search
                hits[i].metadata["fetch_error"] = str(exc)[:200]
                continue
            text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
            if result.is_error or not text.strip():
                hits[i].metadata["fetch_error"] = text[:200] or "empty page"
                continue
            hits[i] = hits[i].model_copy(
                update={
                    "content": text.strip(),
                    "metadata": {**hits[i].metadata, "fetched_by": settings.page_tool},
                }
            )
        return hits


async def refusals(ctx: PlatformContext[WebSearchMcpSettings], urls: list[str]) -> list[str | None]:
    """Why the network guard refuses each URL (None: it may be fetched), all checked at once with
    the context's address policy (only global addresses without one) and resolver."""
    from fanfuse.net.guard import check_url, system_resolver
    from fanfuse.net.policy import FetchPolicy

    policy = ctx.addresses or FetchPolicy()
    resolver = ctx.resolver or system_resolver

    async def one(url: str) -> str | None:
        try:
            await check_url(url, policy, resolver)
        except Refused as exc:
            return str(exc)
        return None

    return list(await asyncio.gather(*(one(url) for url in urls)))
