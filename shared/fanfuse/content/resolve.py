"""Resolve a redirect link to the URL of the page itself (the resolving stage's work).

Results of some platforms are redirects (Sogou's `/link?url=...`, tracking links): fusion must
see the real page, or the same article found twice would not be merged. A URL is followed
through at most `max_redirects` hops, every hop checked by the network guard; a platform whose
redirect page assembles the target in a script says how to read it (`read_target`); a plain
`<meta http-equiv="refresh">` page is read here. The answer is the clean URL (`urls.clean_url`:
no tracking parameters or fragment, but the scheme and host as served, so it stays fetchable).
"""

from __future__ import annotations

import html
from collections.abc import Callable

from fanfuse.fusion.urls import clean_url
from fanfuse.net import guard
from fanfuse.net.policy import RESOLVE_MAX_BYTES
from fanfuse.net.runner import Runner
from fanfuse.settings.content import ContentSettings
from fanfuse.wire.models import CallRecord

TargetReader = Callable[[str, bytes], str | None]
"""(final URL, body of the page there) -> the page's real target, when a platform knows how."""


def meta_refresh_target(body: bytes) -> str | None:
    """The target of an HTML `<meta http-equiv="refresh" content="0;url=...">` page.

    One pass over the first RESOLVE_MAX_BYTES, no regex: each `<meta` is read up to its `>`
    and the scan goes on after it, so every byte is looked at a bounded number of times (the
    regex this replaces backtracked: 25 KB of unclosed `<meta http-equiv=refresh` took 11 s).
    """
    window = body[:RESOLVE_MAX_BYTES]
    lower = window.lower()
    if b"refresh" not in lower:
        return None
    at = lower.find(b"<meta")
    while at != -1:
        end = lower.find(b">", at)
        if end == -1:
            return None  # a tag never closed is no tag
        attrs = _attributes(window[at + 5 : end])
        if attrs.get(b"http-equiv", b"").strip().lower() == b"refresh":
            target = _refresh_url(attrs.get(b"content", b""))
            if target:
                return html.unescape(target.decode("utf-8", errors="replace"))
        at = lower.find(b"<meta", end)
    return None


_SPACE = b" \t\n\r\f"


def _attributes(tag: bytes) -> dict[bytes, bytes]:
    """The attributes of one tag's text (after its name), names lowercased, first one wins;
    one left-to-right pass, as HTML's tokenizer reads them."""
    attrs: dict[bytes, bytes] = {}
    i, n = 0, len(tag)
    while i < n:
        while i < n and (tag[i] in _SPACE or tag[i] == ord("/")):
            i += 1
        start = i
        while i < n and tag[i] not in _SPACE and tag[i] not in b"/=":
            i += 1
        name = tag[start:i].lower()
        while i < n and tag[i] in _SPACE:
            i += 1
        value = b""
        if i < n and tag[i] == ord("="):
            i += 1
            while i < n and tag[i] in _SPACE:
                i += 1
            if i < n and tag[i] in b"\"'":
                close = tag.find(tag[i : i + 1], i + 1)
                close = n if close == -1 else close
                value, i = tag[i + 1 : close], close + 1
            else:
                start = i
                while i < n and tag[i] not in _SPACE:
                    i += 1
                value = tag[start:i]
        if name:
            attrs.setdefault(name, value)
        elif i == start:
            i += 1  # a stray `=`: step over it
    return attrs


def _refresh_url(content: bytes) -> bytes | None:
    """The URL of a refresh `content` value: `0; url=...`, `0;URL='...'`, `0, ...` (HTML's
    declarative refresh: a number, a separator, an optional `url=`, an optionally quoted URL)."""
    rest = content.strip(_SPACE)
    digits = len(rest) - len(rest.lstrip(b"0123456789."))
    if digits == 0:
        return None
    rest = rest[digits:].lstrip(_SPACE)
    if not rest[:1] or rest[:1] not in b";,":
        return None
    rest = rest[1:].lstrip(_SPACE)
    if rest[:3].lower() == b"url":
        after = rest[3:].lstrip(_SPACE)
        if after[:1] == b"=":
            rest = after[1:].lstrip(_SPACE)
    if rest[:1] and rest[:1] in b"\"'":
        close = rest.find(rest[:1], 1)
        rest = rest[1:] if close == -1 else rest[1:close]
    rest = rest.strip(_SPACE)
    return rest or None


async def resolve_url(
    runner: Runner,
    key: str,
    url: str,
    settings: ContentSettings,
    calls: list[CallRecord] | None,
    read_target: TargetReader | None = None,
) -> str:
    """The clean URL of the page `url` leads to (redirects followed, every hop checked)."""
    policy = settings.fetch_policy(max_bytes=RESOLVE_MAX_BYTES)
    response, final = await guard.get(runner, key, url, policy, calls)
    target = read_target(final, response.body) if read_target is not None else None
    target = target or meta_refresh_target(response.body)
    if target and target.startswith(("http://", "https://")):
        final = target  # not fetched here; the fetching stage checks it first
    return clean_url(final)
