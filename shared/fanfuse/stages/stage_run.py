"""What every stage shares: the run it works on (`StageRun`) and the progress reporter.

Progress goes to the platform document through a throttled reporter, so no document is written
more than about once per `progress_interval` except at stage changes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fanfuse.net.runner import Runner
from fanfuse.platforms.contract import Platform, PlatformContext, SearchParams
from fanfuse.rules import progress
from fanfuse.rules.limits import Budget
from fanfuse.settings.content import ContentSettings
from fanfuse.stages.cache import QueryCache
from fanfuse.store.ports import TaskDocuments
from fanfuse.support.redact import redact
from fanfuse.wire.models import CallRecord, Hit, PlatformRun, Stage, StepProgress, utcnow

log = logging.getLogger(__name__)


class Reporter:
    """Writes a run's stage and progress to its platform document, throttled. `label`: the
    chain member working for the run (`brave: Searching: ...` on google's document), if not
    the run's own platform."""

    def __init__(
        self,
        store: TaskDocuments,
        run: PlatformRun,
        stages: list[Stage],
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        label: str | None = None,
    ) -> None:
        self.store, self.run, self.stages = store, run, stages
        self.interval, self.clock, self.label = interval, clock, label
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
        if self.label:
            self.message = f"{self.label}: {self.message}"
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
            lease=run.lease,
        )


@dataclass
class StageRun:
    """One platform run as its stages see it; built once by the service, so no stage reads
    settings or finds a runner of its own.

    `ctx` carries the platform's settings, the shared runner and the run's record (calls,
    provider, timings, options, failed queries, cache use); `content` the content stages'
    settings; `cache` the search cache as this run may use it.
    """

    platform: Platform[Any]
    ctx: PlatformContext[Any]
    params: SearchParams
    reporter: Reporter
    content: ContentSettings
    cache: QueryCache | None = None
    """None: this run neither reads nor writes the cache."""
    fetch_budget: Budget | None = None
    """This run's share of the search's page fetches (limits.py); None: not capped."""

    @property
    def runner(self) -> Runner:
        return self.ctx.runner

    @property
    def calls(self) -> list[CallRecord]:
        return self.ctx.record.calls

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
        at the end. A hit whose work raises stays, with the reason in `metadata[error_key]`:
        one of `errors` (the expected ones) by its message, any other exception by its type and
        message, logged with its traceback. Whatever one page does (a codec error, a parser's
        bug) is that hit's failure, never the platform's, so never its breaker's; only a
        cancellation (the run's deadline, a cancel) goes through.
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
                    out[index] = _failed(hit, error_key, str(exc))
                except Exception as exc:
                    log.warning("%s: %s failed", stage.value, redact(hit.url), exc_info=exc)
                    out[index] = _failed(hit, error_key, redact(f"{type(exc).__name__}: {exc}"))
                done += 1
                self.reporter.step(done, total, f"{done}/{total}{unit}")

        await asyncio.gather(*(one(i) for i in indices))
        self.reporter.step(total, total, summary(ok, total))
        return out


def _failed(hit: Hit, error_key: str, reason: str) -> Hit:
    return hit.model_copy(update={"metadata": {**hit.metadata, error_key: reason[:300]}})


StageFn = Callable[[StageRun, list[Hit]], Awaitable[list[Hit]]]
"""A stage: the run's hits in, the hits after the stage out."""
