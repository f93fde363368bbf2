"""The fetching_content stage: fetch the pages of the hits that came without content.

A platform that brings content is not fetched again. Pages are fetched concurrently up to the
content settings' `concurrency` (see content.fetch for the guard and the extraction); a page
that fails, for whatever reason (refused, an error answer, a body that cannot be decoded, no
text, an exception of the extractor), keeps its hit, with the reason in `metadata.fetch_error`:
one hostile page never fails its platform run, so never counts against its breaker.
"""

from __future__ import annotations

from fanfuse.content.fetch import fetch_page
from fanfuse.stages.stage_run import StageRun
from fanfuse.wire.errors import NotExtracted, ProviderError, Refused
from fanfuse.wire.models import Hit, Stage


def fetched_message(ok: int, total: int) -> str:
    return f"{ok}/{total} pages ({total - ok} failed)"


async def fetch_content(run: StageRun, hits: list[Hit]) -> list[Hit]:
    key = f"{run.platform.name}/fetch"

    async def fetch(hit: Hit) -> Hit:
        text, facts = await fetch_page(run.runner, key, hit.url, run.content, run.calls)
        return hit.model_copy(update={"content": text, "metadata": {**hit.metadata, **facts}})

    wanted = [i for i, h in enumerate(hits) if not h.content]
    if run.fetch_budget is not None:  # the search's page-fetch cap: best ranked first
        wanted = run.fetch_budget.choose(hits, wanted)
    return await run.each_hit(
        Stage.FETCHING_CONTENT,
        hits,
        wanted,
        fetch,
        concurrency=run.content.concurrency,
        errors=(Refused, NotExtracted, ProviderError),
        error_key="fetch_error",
        unit=" pages",
        summary=fetched_message,
    )
