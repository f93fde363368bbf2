"""Fetch one result page and extract its main text (the fetching_content stage's work).

Pages are fetched through the network guard (no private, loopback or link-local address unless
allowed, checked on every redirect hop), with a cap on time and size per page; only HTML and
plain text are read, and trafilatura extracts the main text of HTML (boilerplate, navigation and
ads left out). Decoding and extraction run in a thread: they are CPU work. The body arrives
already capped on its decoded size (`net.codings`), and its charset is one of the WHATWG labels
or UTF-8 (`net.charsets`): a page cannot name `idna` or `punycode` to raise or to spin.
trafilatura and selectolax are imported on first use, so a worker that never fetches a page
never loads them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fanfuse.net import charsets, guard
from fanfuse.net.runner import Response, Runner
from fanfuse.settings.content import ContentSettings
from fanfuse.wire.errors import NotExtracted
from fanfuse.wire.models import CallRecord

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
    text = await asyncio.to_thread(page_text, response, final)
    if not text:
        raise NotExtracted("no main text")
    facts: dict[str, Any] = {"fetched_url": final, "content_type": response.content_type}
    if response.truncated:
        facts["fetch_truncated"] = True
    return text, facts


def page_text(response: Response, url: str) -> str:
    """Decode and extract: CPU work on up to `max_bytes` of page, run off the event loop."""
    return extract_text(decode_page(response), response.content_type, url)


def decode_page(response: Response) -> str:
    """The page as text by its BOM, its header's charset, or (HTML) its `<meta>` charset,
    each a WHATWG label only (`net.charsets`); UTF-8 with replacement otherwise."""
    html = response.content_type in ("text/html", "application/xhtml+xml")
    return charsets.text_of(response.body, response.headers.get("content-type", ""), html=html)
