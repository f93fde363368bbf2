"""Fetch one result page and extract its main text (the fetching_content stage's work).

Pages are fetched through the network guard (no private, loopback or link-local address unless
allowed, checked on every redirect hop), with a cap on time and size per page; only HTML and
plain text are read, and trafilatura extracts the main text of HTML (boilerplate, navigation and
ads left out). Extraction runs in a thread: it is CPU work. trafilatura and selectolax are
imported on first use, so a worker that never fetches a page never loads them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fanfuse.content.settings import ContentSettings
from fanfuse.errors import NotExtracted
from fanfuse.models import CallRecord
from fanfuse.net import guard
from fanfuse.net.runner import Response, Runner

ACCEPTED = ("text/html", "application/xhtml+xml", "text/plain")


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
    calls: list[CallRecord] | None = None,
    resolver: guard.Resolver = guard.system_resolver,
) -> tuple[str, dict[str, Any]]:
    """(main text, facts about the fetch) of `url`, or an exception saying why not."""
    response, final = await guard.get(
        runner, key, url, settings.fetch_policy(), calls, accept_types=ACCEPTED, resolver=resolver
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
