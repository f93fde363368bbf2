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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from fanfuse.platforms import Registry
from fanfuse.platforms.contract import Pace, Platform, PlatformContext, RunRecord, SearchParams
from fanfuse.platforms.pricing import cost_budget, estimate
from fanfuse.rules import budget, lifecycle, limits, spend
from fanfuse.rules.limits import Budget
from fanfuse.service.ledger import RunHold
from fanfuse.settings import Settings
from fanfuse.store.ports import CacheStore, TaskDocuments
from fanfuse.support.redact import redact
from fanfuse.wire.cost import Price
from fanfuse.wire.errors import Cancelled, ProviderError
from fanfuse.wire.models import (
    CacheEntry,
    FailureKind,
    Hit,
    PlatformRun,
    PlatformState,
    QueryFailure,
    Stage,
    Task,
)

if TYPE_CHECKING:
    from fanfuse.net.runner import Runner
    from fanfuse.settings.content import ContentSettings
    from fanfuse.stages.stage_run import Reporter

log = logging.getLogger(__name__)
T = TypeVar("T")

PaceFor = Callable[[str, Platform[Any]], Pace | None]
"""A platform's pace wait (service/pacing.py), by name; None: not paced."""


@dataclass
class Assignment:
    """One chain member's part of a run (service/chains.py): who answers, which of the task's
    queries (indices), the record its calls go to (the caller's, so that a member cancelled
    mid-call leaves its calls), the run's share of the search's provider calls (shared by the
    members of a delivery), and the part of the run's money it may spend."""

    name: str
    queries: list[int]
    record: RunRecord
    calls: Budget
    money_share: float = 1.0


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
        pace: PaceFor | None = None,
    ) -> None:
        self.documents, self.cache = documents, cache
        self.registry, self.settings, self.clock = registry, settings, clock
        self._runner, self._content = runner, content
        self._prices = prices
        """Each platform's price here (budgets.Budgets.price: read once per platform)."""
        self._pace = pace

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
        member: Assignment | None = None,
        abort: asyncio.Event | None = None,
        unsaved: list[CacheEntry] | None = None,
    ) -> lifecycle.Outcome:
        """`stop`: checked between steps; True ends the run as `Cancelled` (a cancel, or its
        lease went to another delivery). `member`: a chain member answering for the run (its
        platform, its queries; progress still goes to the run's document). `abort`, once set,
        ends it so at once, its calls in flight cut (a cancel in this process:
        ledger.InFlight). `unsaved`: where the run's new cache entries go instead of the store,
        for `save_cache` once the run has been counted (None: written as the run goes)."""
        started = time.monotonic()
        name = run.name if member is None else member.name
        indices = list(range(len(task.queries))) if member is None else member.queries
        params = SearchParams(
            queries=[task.queries[i] for i in indices],
            limit=task.request.depth,
            language=task.request.language,
            include_content=task.request.include_content,
            options=task.request.options,
            now=task.created_at,  # every platform counts a time range back from the same instant
        )
        record = RunRecord() if member is None else member.record
        failure: FailureKind | None = None
        reporter: Reporter | None = None
        calls = (
            Budget(limits.share(self.settings.max_provider_calls_per_search, run.of))
            if member is None
            else member.calls
        )
        fetches = Budget(limits.share(self.settings.max_page_fetches_per_search, run.of))
        money: Budget | None = None
        try:
            platform = self.registry.get(name)
            # The run path alone needs the stages and the network layer:
            # imported here, so a status or start request never loads them at cold start.
            from fanfuse.content.compress import within_chars
            from fanfuse.stages import pipeline
            from fanfuse.stages.cache import QueryCache, cache_scope
            from fanfuse.stages.stage_run import Reporter, StageRun

            price = self._prices(name)
            share = 1.0 if member is None else member.money_share
            per_call = self._per_call(task, name, price, calls.cap)
            money = self._money(task, run, per_call, share)
            planned = pipeline.plan(platform, params)
            label = None if name == run.name else name
            reporter = Reporter(
                self.documents, run, planned, self.settings.progress_interval, label=label
            )
            ctx = PlatformContext(
                settings=platform.settings(),
                runner=self.runner,
                record=record,
                report=reporter.step,
                addresses=self._content,  # a URL a platform has fetched is guarded as ours are
                call_budget=calls,
                price=price,
                cost_budget=money,
                pace=self._pace(name, platform) if self._pace is not None else None,
                hold=self._hold(task, run, per_call),
            )
            cache = QueryCache.for_run(
                self.cache,
                name,
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
                hits = await abortable(pipeline.execute(stage_run, planned, stop), abort)
            hits = renumbered(within_chars(hits, self.settings.max_content_chars), indices)
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
            failed_queries=renumbered_failures(record.failed_queries, indices),
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

    def _per_call(self, task: Task, name: str, price: Price, calls: int) -> float:
        """The most one provider call of platform `name` (the run's, or a chain member's) can
        cost in this run (pricing.py); 0: a free platform."""
        platform = self.registry.get(name)
        planned = estimate(
            platform,
            price,
            platform.settings(),  # the run's: it reads them to run at all
            queries=len(task.queries),
            depth=task.request.depth,
            include_content=task.request.include_content,
            call_cap=calls,
        )
        return planned.per_call_usd

    def _money(
        self, task: Task, run: PlatformRun, per_call: float, share: float = 1.0
    ) -> Budget | None:
        """The run's share of the search's money (rules/budget.py), or `share` of it for a chain
        member, as the calls it affords, each at its dearest (pricing.py), and never more than
        what the run's calls so far leave of it (every attempt's and member's: a run taken over
        after its worker died mid-call keeps its hold counted); None: no budget, or a free
        platform."""
        usd = budget.share(task.cost, run.name)
        if usd is None:
            return None
        left = min(usd * share, usd - spend.committed(run))
        return cost_budget(max(left, 0.0), per_call)

    def _hold(self, task: Task, run: PlatformRun, per_call: float) -> RunHold | None:
        """What counts each priced call before it is sent (ledger.py); None: a free platform."""
        if per_call <= 0 or run.lease is None:
            return None
        return RunHold(self.documents, task.task_id, run.name, run.lease, per_call, self.clock)


async def abortable(work: Awaitable[T], abort: asyncio.Event | None) -> T:
    """`work`'s result, or `Cancelled` as soon as `abort` is set: `work` is cancelled then, so
    its calls in flight are cut (the runner records each as sent and unanswered: counted)."""
    if abort is None:
        return await work
    running = asyncio.ensure_future(work)
    aborted = asyncio.ensure_future(abort.wait())
    try:
        await asyncio.wait({running, aborted}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        aborted.cancel()
        if not running.done():
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
    if running.cancelled():
        raise Cancelled("cancelled while calling")
    return running.result()


def renumbered(hits: list[Hit], indices: Sequence[int]) -> list[Hit]:
    """A member asked some of the task's queries numbers its hits among those: back to the
    task's numbering (`indices[i]` is the task's index of the member's query `i`)."""
    if list(indices) == list(range(len(indices))):
        return hits
    return [h.model_copy(update={"query_index": indices[h.query_index]}) for h in hits]


def renumbered_failures(failures: list[QueryFailure], indices: Sequence[int]) -> list[QueryFailure]:
    if list(indices) == list(range(len(indices))):
        return failures
    return [f.model_copy(update={"query_index": indices[f.query_index]}) for f in failures]


def searching(reporter: Reporter | None) -> bool:
    """Whether a run ended in its searching stage (or before it): only there does it talk to its
    provider; what fails later (a redirect, a result page, the compressor) is not the provider's."""
    return reporter is None or reporter.stage is Stage.SEARCHING
