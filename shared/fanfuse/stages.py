"""A platform run's stages: searching -> resolving -> fetching_content -> compressing.

A run plans only the stages it has work for (a local corpus needs no URL resolving; content
fetching only when asked and the platform does not bring content itself). Progress goes to the
platform document through a throttled reporter, so no document is written more than about once
per `progress_interval` except at stage changes.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fanfuse import progress
from fanfuse.models import Hit, PlatformRun, Stage, StepProgress, utcnow
from fanfuse.platforms.base import Platform, PlatformContext, SearchParams
from fanfuse.store.base import TaskStore


class Cancelled(Exception):
    """The search was cancelled; the worker stops between stages."""


class Reporter:
    """Writes a run's stage and progress to its platform document, throttled."""

    def __init__(
        self,
        store: TaskStore,
        run: PlatformRun,
        stages: list[Stage],
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.run, self.stages = store, run, stages
        self.interval, self.clock = interval, clock
        self.stage = stages[0]
        self.message = ""
        self._last = float("-inf")

    def enter(self, stage: Stage, detail: str, total: int = 0) -> None:
        self.stage = stage
        self._write(0, total, detail, force=True)

    def done(self, detail: str, total: int) -> None:
        """The current stage is complete: always written (a stage end is worth a write)."""
        self._write(total, total, detail, force=True)

    def step(self, current: int, total: int, detail: str) -> None:
        self._write(current, total, detail, force=False)

    def _write(self, current: int, total: int, detail: str, *, force: bool) -> None:
        run = self.run
        self.message = progress.stage_message(self.stage, detail)
        now = self.clock()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        self.store.patch_run(
            run.task_id,
            run.name,
            {
                "stage": progress.stage_name(run.name, self.stage.value, run.of),
                "stages": [s.value for s in self.stages],
                "progress": StepProgress(current=current, total=total).model_dump(),
                "percent": progress.stage_percent(self.stages, self.stage, current, total),
                "message": progress.platform_message(run.index, run.of, run.name, self.message),
                "updated_at": utcnow().isoformat(),
            },
        )


@dataclass
class StageRun:
    """What the later stages get: the platform, its context and parameters, the reporter."""

    platform: Platform
    ctx: PlatformContext
    params: SearchParams
    reporter: Reporter
    info: dict[str, Any] = field(default_factory=dict)

    async def each_hit(
        self,
        stage: Stage,
        hits: list[Hit],
        indices: Sequence[int],
        work: Callable[[Hit], Awaitable[Hit]],
        *,
        concurrency: int,
        errors: tuple[type[Exception], ...],
        error_key: str,
        unit: str,
        summary: Callable[[int, int], str],
    ) -> list[Hit]:
        """`hits`, each one at `indices` replaced by `work(hit)`, at most `concurrency` at once.

        Enters `stage` and reports `{done}/{total}{unit}` after each hit and `summary(ok, total)`
        at the end. A hit whose work raises one of `errors` stays, with the reason in
        `metadata[error_key]`.
        """
        total = len(indices)
        self.reporter.enter(stage, f"0/{total}{unit}", total)
        gate = asyncio.Semaphore(max(concurrency, 1))
        out = list(hits)
        done = ok = 0

        async def one(index: int) -> None:
            nonlocal done, ok
            hit = hits[index]
            async with gate:
                try:
                    out[index] = await work(hit)
                    ok += 1
                except errors as exc:
                    meta = {**hit.metadata, error_key: str(exc)[:300]}
                    out[index] = hit.model_copy(update={"metadata": meta})
                done += 1
                self.reporter.step(done, total, f"{done}/{total}{unit}")

        await asyncio.gather(*(one(i) for i in indices))
        self.reporter.step(total, total, summary(ok, total))
        return out


StageFn = Callable[[StageRun, list[Hit]], Awaitable[list[Hit]]]

# Later stages live in their own modules, imported only by runs that plan them, so a worker
# for a local corpus never imports an HTML extractor.
STAGE_MODULES: dict[Stage, str] = {
    Stage.RESOLVING: "fanfuse.content.resolve:resolve",
    Stage.FETCHING_CONTENT: "fanfuse.content.fetch:fetch_content",
    Stage.COMPRESSING: "fanfuse.content.compress:compress",
}


def plan(platform: Platform, params: SearchParams) -> list[Stage]:
    wanted = [Stage.SEARCHING]
    if platform.capabilities.resolves_urls:
        wanted.append(Stage.RESOLVING)
    if params.include_content and not platform.capabilities.content:
        wanted.append(Stage.FETCHING_CONTENT)
    if params.include_content:
        wanted.append(Stage.COMPRESSING)
    return [s for s in wanted if s is Stage.SEARCHING or s in STAGE_MODULES]


def _handler(stage: Stage) -> StageFn:
    module, _, attr = STAGE_MODULES[stage].partition(":")
    fn: StageFn = getattr(importlib.import_module(module), attr)
    return fn


async def execute(
    run: StageRun, stages: list[Stage], check_cancelled: Callable[[], bool]
) -> list[Hit]:
    """Run the planned stages in order, checking for cancellation between them."""
    timings: dict[str, float] = run.info.setdefault("timings", {})
    hits: list[Hit] = []
    for stage in stages:
        if check_cancelled():
            raise Cancelled()
        started = time.monotonic()
        if stage is Stage.SEARCHING:  # always first; the claim already reported it
            lists = await run.platform.search(run.ctx, run.params)
            hits = _ranked(lists, run.params.limit)
            if stage is stages[-1]:  # the fan-in writes it with the run's end
                run.reporter.message = progress.found_message(len(hits))
            else:
                run.reporter.done(f"Found {len(hits)} results", len(hits))
        else:
            hits = await _handler(stage)(run, hits)
        timings[stage.value] = round(time.monotonic() - started, 4)
    return hits


def _ranked(lists: list[list[Hit]], limit: int) -> list[Hit]:
    """Number each query's list 1..n (the platform's order) and tag it with its query."""
    hits: list[Hit] = []
    for qi, items in enumerate(lists):
        for rank, hit in enumerate(items[:limit], 1):
            hits.append(hit.model_copy(update={"query_index": qi, "rank": rank}))
    return hits
