"""The searching stage: ask the platform, number each query's list in the platform's order."""

from __future__ import annotations

from fanfuse import progress
from fanfuse.models import Hit, Stage
from fanfuse.stages.base import StageRun


async def search(run: StageRun, hits: list[Hit]) -> list[Hit]:
    """Always the first stage (`hits` is empty); the claim already reported its start."""
    lists = await run.platform.search(run.ctx, run.params)
    found = ranked(lists, run.params.limit)
    if run.reporter.stages[-1] is Stage.SEARCHING:  # the fan-in writes it with the run's end
        run.reporter.message = progress.found_message(len(found))
    else:
        run.reporter.done(f"Found {len(found)} results", len(found))
    return found


def ranked(lists: list[list[Hit]], limit: int) -> list[Hit]:
    """Number each query's list 1..n (the platform's order) and tag it with its query."""
    hits: list[Hit] = []
    for qi, items in enumerate(lists):
        for rank, hit in enumerate(items[:limit], 1):
            hits.append(hit.model_copy(update={"query_index": qi, "rank": rank}))
    return hits
