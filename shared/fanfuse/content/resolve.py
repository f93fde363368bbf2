"""Resolve a redirect link to the URL of the page itself (the resolving stage's work).

Results of some platforms are redirects (Sogou's `/link?url=...`, tracking links): fusion must
see the real page, or the same article found twice would not be merged. A URL is followed
through at most `max_redirects` hops, every hop checked by the network guard; a platform whose
redirect page assembles the target in a script says how to read it (`read_target`); a plain
`<meta http-equiv="refresh">` page is read here. The answer is the clean URL (`urls.clean_url`:
no tracking parameters or fragment, but the scheme and host as served, so it stays fetchable).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from fanfuse.content.settings import ContentSettings
from fanfuse.models import CallRecord
from fanfuse.net import guard
from fanfuse.net.policy import RESOLVE_MAX_BYTES
from fanfuse.net.runner import Runner
from fanfuse.urls import clean_url

META_REFRESH = re.compile(
    rb"""<meta[^>]+http-equiv=["']?refresh["']?[^>]+content=["']?\s*\d+\s*;\s*url=([^"'>\s]+)""",
    re.IGNORECASE,
)

TargetReader = Callable[[str, bytes], str | None]
"""(final URL, body of the page there) -> the page's real target, when a platform knows how."""


def meta_refresh_target(body: bytes) -> str | None:
    """The target of an HTML `<meta http-equiv="refresh" content="0;url=...">` page."""
    match = META_REFRESH.search(body[:RESOLVE_MAX_BYTES])
    return match.group(1).decode("utf-8", errors="replace") if match else None


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
