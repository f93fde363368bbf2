"""The fetching_content stage: fetch result pages and extract their main text.

Only for hits without content (a platform that brings content is not fetched again). Pages are
fetched concurrently up to `concurrency`, through the network guard (no private, loopback or
link-local address unless allowed, checked on every redirect hop), with a cap on time and size
per page; only HTML and plain text are read, and trafilatura extracts the main text of HTML
(boilerplate, navigation and ads left out). Extraction runs in a thread: it is CPU work.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fanfuse.content import net
from fanfuse.content.settings import ContentSettings
from fanfuse.models import Hit, Stage
from fanfuse.platforms.base import ProviderError
from fanfuse.platforms.runner import Response, Runner, default_runner
from fanfuse.stages import StageRun

ACCEPTED = ("text/html", "application/xhtml+xml", "text/plain")


class NotExtracted(Exception):
    """The page was fetched but holds no text worth keeping."""


def extract_text(body: str, content_type: str, url: str) -> str:
    """The main text of a page: trafilatura for HTML, the text itself for text/plain."""
    if content_type == "text/plain":
        return body.strip()
    import trafilatura

    text = trafilatura.extract(
        body, url=url, include_comments=False, include_tables=True, favor_precision=True
    )
    if not text:
        from selectolax.lexbor import LexborHTMLParser

        tree = LexborHTMLParser(body)
        for tag in ("script", "style", "noscript", "nav", "footer", "header"):
            for node in tree.css(tag):
                node.decompose()
        root = tree.body
        text = " ".join(root.text(separator=" ").split()) if root is not None else ""
    return str(text).strip()


async def fetch_page(
    runner: Runner,
    key: str,
    url: str,
    settings: ContentSettings,
    calls: list[dict[str, Any]] | None = None,
    resolver: net.Resolver = net.system_resolver,
) -> tuple[str, dict[str, Any]]:
    """(main text, facts about the fetch) of `url`, or an exception saying why not."""
    response, final = await net.get(
        runner, key, url, settings, calls, accept_types=ACCEPTED, resolver=resolver
    )
    if response.rejected_type:
        raise NotExtracted(f"unsupported content type {response.content_type or 'unknown'}")
    if response.status >= 400:
        raise NotExtracted(f"HTTP {response.status}")
    text = await asyncio.to_thread(extract_text, _decode(response), response.content_type, final)
    if not text:
        raise NotExtracted("no main text")
    facts: dict[str, Any] = {"fetched_url": final, "content_type": response.content_type}
    if response.truncated:
        facts["fetch_truncated"] = True
    return text, facts


def _decode(response: Response) -> str:
    if "charset=" not in response.headers.get("content-type", "").lower():
        head = response.body[:2048].lower()
        for enc in ("gb2312", "gbk", "gb18030", "big5", "shift_jis", "euc-kr"):
            if f"charset={enc}".encode() in head or f'charset="{enc}"'.encode() in head:
                return response.body.decode(enc, errors="replace")
    return response.text()


def fetched_message(ok: int, total: int) -> str:
    return f"{ok}/{total} pages ({total - ok} failed)"


async def fetch_content(run: StageRun, hits: list[Hit]) -> list[Hit]:
    settings = ContentSettings()
    runner = run.ctx.runner or default_runner()
    calls: list[dict[str, Any]] = run.info.setdefault("calls", [])

    async def fetch(hit: Hit) -> Hit:
        text, facts = await fetch_page(
            runner, f"{run.platform.name}/fetch", hit.url, settings, calls
        )
        return hit.model_copy(update={"content": text, "metadata": {**hit.metadata, **facts}})

    return await run.each_hit(
        Stage.FETCHING_CONTENT,
        hits,
        [i for i, h in enumerate(hits) if not h.content],
        fetch,
        concurrency=settings.concurrency,
        errors=(net.Refused, NotExtracted, ProviderError),
        error_key="fetch_error",
        unit=" pages",
        summary=fetched_message,
    )
