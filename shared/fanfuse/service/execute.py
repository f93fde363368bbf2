"""One claimed platform run's stages, from the search parameters to how the run ended.

Kept apart from the service, which decides when a run starts and what its end changes (claim,
lease, breaker, fan-in): this is only the work in between, and the classification of its end
(succeeded, cancelled, timed out by the deadline, failed, and what kind of failure the platform's
breaker should count).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from fanfuse.platforms import Registry
from fanfuse.platforms.base import PlatformContext, RunRecord, SearchParams
from fanfuse.platforms.pricing import cost_budget, estimate
from fanfuse.rules import budget, lifecycle, limits
from fanfuse.rules.limits import Budget
from fanfuse.settings import Price, Settings
from fanfuse.store.base import CacheStore, TaskDocuments
from fanfuse.support.redact import redact
from fanfuse.wire.errors import Cancelled, ProviderError
from fanfuse.wire.models import CacheEntry, FailureKind, PlatformRun, PlatformState, Stage, Task

if TYPE_CHECKING:
    from fanfuse.content.settings import ContentSettings
    from fanfuse.net.runner import Runner
    from fanfuse.stages.base import Reporter

log = logging.getLogger(__name__)


class Executor:
    """Runs platform stages with one shared network runner, made on first use (a process that
    only starts searches or answers status never builds it), and the content settings its
    composition root read. It takes the store twice, as its two roles: the run's progress goes
    to `documents`, its query cache's entries to `cache` (one object in every runtime)."""

    def __init__(
        self,
        documents: TaskDocuments,
        cache: CacheStore,
        registry: Registry,
        settings: Settings,
        clock: Callable[[], datetime],
        runner: Runner | None,
        content: ContentSettings,
        *,
        prices: Callable[[str], Price],
    ) -> None:
        self.documents, self.cache = documents, cache
        self.registry, self.settings, self.clock = registry, settings, clock
        self._runner, self._content = runner, content
        self._prices = prices
        """Each platform's price here (budgets.Budgets.price: read once per platform)."""

    @property
    def runner(self) -> Runner:
        from fanfuse.net.runner import default_runner

        self._runner = self._runner or default_runner()
        return self._runner

    @property
    def made_runner(self) -> Runner | None:
        """The runner if one was made (or given): the aggregate's reranker uses it, and builds
        none of its own unless it calls a model."""
        return self._runner

    async def run(
        self,
        task: Task,
        run: PlatformRun,
        stop: Callable[[], bool],
        unsaved: list[CacheEntry] | None = None,
    ) -> lifecycle.Outcome:
        """`stop`: checked between steps; True ends the run as `Cancelled` (a cancel, or its
        lease went to another delivery). `unsaved`: where the run's new cache entries go
        instead of the store, for `save_cache` once the run has been counted (None: written as
        the run goes)."""
        started = time.monotonic()
        params = SearchParams(
            queries=task.queries,
            limit=task.request.depth,
            language=task.request.language,
            include_content=task.request.include_content,
            options=task.request.options,
            now=task.created_at,  # every platform counts a time range back from the same instant
        )
        record = RunRecord()
        failure: FailureKind | None = None
        reporter: Reporter | None = None
        calls = Budget(limits.share(self.settings.max_provider_calls_per_search, run.of))
        fetches = Budget(limits.share(self.settings.max_page_fetches_per_search, run.of))
        money: Budget | None = None
        try:
            platform = self.registry.get(run.name)
            # The run path alone needs the stages and the network layer:
            # imported here, so a status or start request never loads them at cold start.
            from fanfuse.content.compress import within_chars
            from fanfuse.stages import pipeline
            from fanfuse.stages.base import Reporter, StageRun
            from fanfuse.stages.cache import QueryCache, cache_scope

            price = self._prices(run.name)
            money = self._money(task, run, price, calls.cap)
            planned = pipeline.plan(platform, params)
            reporter = Reporter(self.documents, run, planned, self.settings.progress_interval)
            ctx = PlatformContext(
                settings=platform.settings(),
                runner=self.runner,
                record=record,
                report=reporter.step,
                addresses=self._content,  # a URL a platform has fetched is guarded as ours are
                call_budget=calls,
                price=price,
                cost_budget=money,
            )
            cache = QueryCache.for_run(
                self.cache,
                run.name,
                ctx.settings,
                params,
                task.request.cache,
                default_ttl_s=self.settings.cache_ttl_seconds,
                clock=self.clock,
                scope=cache_scope(task.owner, shared=self.settings.cache_scope == "shared"),
            )
            cache.deferred = unsaved
            stage_run = StageRun(
                platform, ctx, params, reporter, self._content, cache, fetch_budget=fetches
            )
            remaining = (task.deadline_at - self.clock()).total_seconds()
            async with asyncio.timeout(max(remaining, 0.001)):
                hits = await pipeline.execute(stage_run, planned, stop)
            hits = within_chars(hits, self.settings.max_content_chars)
            state, error, message = PlatformState.SUCCEEDED, None, reporter.message
        except Cancelled:
            hits, state, error, message = [], PlatformState.CANCELLED, None, "Cancelled"
        except TimeoutError:
            hits, state = [], PlatformState.TIMED_OUT
            error, message = "no result before the deadline", "Timed out"
        except ProviderError as exc:
            hits, state, error, message = [], PlatformState.FAILED, str(exc), ""
            failure = exc.fault if searching(reporter) else FailureKind.INTERNAL
        except Exception as exc:  # a platform's bug must not stop the fan-in
            log.exception("platform %s failed", run.name)
            failure = FailureKind.INTERNAL  # ours to fix: suspending the provider cannot
            error = redact(f"{run.name}: {exc!r}")  # its text is unvetted: it may carry a key
            hits, state, message = [], PlatformState.FAILED, ""
        return lifecycle.Outcome(
            state=state,
            results=hits,
            error=error,
            message=message,
            provider=record.provider,
            timings={**record.timings, "total": round(time.monotonic() - started, 4)},
            calls=record.calls,
            options=record.options,
            failed_queries=record.failed_queries,
            cache=record.cache,
            failure=failure,
            limits=limits.cuts(
                {
                    limits.PROVIDER_CALLS: calls,
                    limits.PAGE_FETCHES: fetches,
                    limits.COST: money,
                }
            ),
        )

    def save_cache(self, entries: list[CacheEntry]) -> None:
        """Write a run's cache entries (`run(unsaved=...)`): the cache is advice, so a store
        error here is logged, never the run's failure."""
        from fanfuse.stages.cache import put

        for entry in entries:
            try:
                put(self.cache, entry)
            except Exception:
                log.warning("could not cache %s's answer", entry.platform, exc_info=True)

    def _money(self, task: Task, run: PlatformRun, price: Price, calls: int) -> Budget | None:
        """The run's share of the search's money (rules/budget.py) as the calls it affords,
        each at its dearest (pricing.py); None: no budget, or a free platform."""
        usd = budget.share(task.cost, run.name)
        if usd is None:
            return None
        platform = self.registry.get(run.name)
        planned = estimate(
            platform,
            price,
            platform.settings(),  # the run's: it reads them to run at all
            queries=len(task.queries),
            depth=task.request.depth,
            include_content=task.request.include_content,
            call_cap=calls,
        )
        return cost_budget(usd, planned.per_call_usd)


def searching(reporter: Reporter | None) -> bool:
    """Whether a run ended in its searching stage (or before it): only there does it talk to its
    provider; what fails later (a redirect, a result page, the compressor) is not the provider's."""
    return reporter is None or reporter.stage is Stage.SEARCHING
