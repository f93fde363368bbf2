"""The resolving stage: every hit's URL followed to the page it leads to (see content.resolve).

Failures keep the original URL, with the reason in `metadata.resolve_error`, and are counted.
"""

from __future__ import annotations

from fanfuse.content.resolve import resolve_url
from fanfuse.errors import ProviderError, Refused
from fanfuse.models import Hit, Stage
from fanfuse.stages.base import StageRun


def resolved_message(ok: int, total: int) -> str:
    return f"{ok}/{total} successful ({total - ok} failed)"


async def resolve(run: StageRun, hits: list[Hit]) -> list[Hit]:
    platform = run.platform

    async def follow(hit: Hit) -> Hit:
        url = await resolve_url(
            run.runner,
            f"{platform.name}/resolve",
            hit.url,
            run.content,
            run.calls,
            platform.resolve_target,
        )
        meta = {**hit.metadata}
        if url != hit.url:
            meta["redirected_from"] = hit.url
        return hit.model_copy(update={"url": url, "metadata": meta})

    return await run.each_hit(
        Stage.RESOLVING,
        hits,
        range(len(hits)),
        follow,
        concurrency=run.content.concurrency,
        errors=(Refused, ProviderError, ValueError),
        error_key="resolve_error",
        unit="",
        summary=resolved_message,
    )
