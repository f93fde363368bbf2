"""The resolving stage: turn redirect links into the URLs of the pages themselves.

Results of some platforms are redirects (Sogou's `/link?url=...`, tracking links): fusion must
see the real page, or the same article found twice would not be merged. Each URL is followed
through at most `max_redirects` hops (every hop checked by the network guard); a platform whose
redirect page assembles the target in a script says how to read it (`resolve_target`); the
result is the canonical URL. Failures keep the original URL and are counted.
"""

from __future__ import annotations

import re
from typing import Any

from fanfuse.content import net
from fanfuse.content.settings import ContentSettings
from fanfuse.fusion import canonical_url
from fanfuse.models import Hit, Stage
from fanfuse.platforms.base import ProviderError
from fanfuse.platforms.runner import default_runner
from fanfuse.stages import StageRun

RESOLVE_MAX_BYTES = 512_000
META_REFRESH = re.compile(
    rb"""<meta[^>]+http-equiv=["']?refresh["']?[^>]+content=["']?\s*\d+\s*;\s*url=([^"'>\s]+)""",
    re.IGNORECASE,
)


def meta_refresh_target(body: bytes) -> str | None:
    """The target of an HTML `<meta http-equiv="refresh" content="0;url=...">` page."""
    match = META_REFRESH.search(body[:RESOLVE_MAX_BYTES])
    return match.group(1).decode("utf-8", errors="replace") if match else None


def resolved_message(ok: int, total: int) -> str:
    return f"{ok}/{total} successful ({total - ok} failed)"


async def resolve(run: StageRun, hits: list[Hit]) -> list[Hit]:
    settings = ContentSettings()
    runner = run.ctx.runner or default_runner()
    calls: list[dict[str, Any]] = run.info.setdefault("calls", [])
    platform = run.platform
    reader = getattr(platform, "resolve_target", None)

    async def follow(hit: Hit) -> Hit:
        response, final = await net.get(
            runner, f"{platform.name}/resolve", hit.url, settings, calls,
            max_bytes=RESOLVE_MAX_BYTES,
        )  # fmt: skip
        target = reader(final, response.body) if reader is not None else None
        target = target or meta_refresh_target(response.body)
        if target and target.startswith(("http://", "https://")):
            final = target  # not fetched here; the fetching stage checks it first
        url = canonical_url(final)
        meta = {**hit.metadata}
        if url != hit.url:
            meta["redirected_from"] = hit.url
        return hit.model_copy(update={"url": url, "metadata": meta})

    return await run.each_hit(
        Stage.RESOLVING,
        hits,
        range(len(hits)),
        follow,
        concurrency=settings.concurrency,
        errors=(net.Refused, ProviderError, ValueError),
        error_key="resolve_error",
        unit="",
        summary=resolved_message,
    )
