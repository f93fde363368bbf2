"""The stages in order, which of them a run plans, and the loop that runs them.

A run plans only the stages it has work for: a local corpus needs no URL resolving, content is
fetched only when asked for and the platform does not bring it itself, and compressed only when
asked for. Each stage is a module registered here by a plain import; the libraries a stage
needs (trafilatura, selectolax) are imported on its first use, so a worker for a local corpus
never loads an HTML extractor.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fanfuse.platforms.contract import Platform, SearchParams
from fanfuse.stages import compressing, fetching, resolving, searching
from fanfuse.stages.stage_run import StageFn, StageRun
from fanfuse.tracing import spans
from fanfuse.wire.errors import Cancelled
from fanfuse.wire.models import Hit, Stage

STAGES: dict[Stage, StageFn] = {
    Stage.SEARCHING: searching.search,
    Stage.RESOLVING: resolving.resolve,
    Stage.FETCHING_CONTENT: fetching.fetch_content,
    Stage.COMPRESSING: compressing.compress,
}


def plan(platform: Platform[Any], params: SearchParams) -> list[Stage]:
    wanted = [Stage.SEARCHING]
    if platform.capabilities.resolves_urls:
        wanted.append(Stage.RESOLVING)
    if params.include_content and not platform.capabilities.content:
        wanted.append(Stage.FETCHING_CONTENT)
    if params.include_content:
        wanted.append(Stage.COMPRESSING)
    return wanted


async def execute(
    run: StageRun, stages: list[Stage], check_cancelled: Callable[[], bool]
) -> list[Hit]:
    """Run the planned stages in order, checking for cancellation between them."""
    hits: list[Hit] = []
    for stage in stages:
        if check_cancelled():
            raise Cancelled()
        started = time.monotonic()
        with spans.span(f"stage {stage.value}", {"fanfuse.stage": stage.value}) as span:
            hits = await STAGES[stage](run, hits)
            if span is not None:
                span.set_attribute("fanfuse.results", len(hits))
        run.ctx.record.timings[stage.value] = round(time.monotonic() - started, 4)
    return hits
