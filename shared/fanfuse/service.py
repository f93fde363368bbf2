"""start / run_platform / aggregate / status / cancel: one code path for both runtimes.

The service talks to a TaskStore and a TaskQueue port; the embedded runtime passes SQLite and an
in-process queue, the Cloud Functions pass Firestore and Cloud Tasks.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from pydantic import ValidationError

from fanfuse import admission, aggregate, fusers, health, lifecycle, logs, progress
from fanfuse.errors import (
    Cancelled,
    InvalidRequest,
    ProviderError,
    QueueUnavailable,
    TaskNotFound,
    problems_of,
)
from fanfuse.models import (
    Accepted,
    CacheState,
    Caller,
    PlatformHealth,
    PlatformRun,
    PlatformState,
    Problem,
    SearchRequest,
    Stage,
    Task,
    TaskStatus,
    TaskView,
    utcnow,
)
from fanfuse.platforms import Registry
from fanfuse.platforms.base import PlatformContext, PlatformSettings, RunRecord, SearchParams
from fanfuse.queue.base import AggregateMessage, PlatformMessage, TaskQueue
from fanfuse.redact import redact
from fanfuse.settings import Settings
from fanfuse.store.base import TaskStore

if TYPE_CHECKING:
    from fanfuse.cache import QueryCache
    from fanfuse.content.settings import ContentSettings
    from fanfuse.net.runner import Runner
    from fanfuse.rerank.base import RerankOrder

log = logging.getLogger(__name__)

DEADLINE_GRACE = timedelta(seconds=0.25)
"""The deadline task runs this long after the deadline. A worker still searching at the deadline
stops and reports by itself, and its fan-in finalizes the search; the deadline task is the
backstop for a worker that never reports. At the same instant, the two would transact on the
task document together, which the Firestore emulator resolves only by its 2 s lock timeout
(production Firestore by aborting one and retrying)."""


class SearchService:
    def __init__(
        self,
        store: TaskStore,
        queue: TaskQueue,
        registry: Registry,
        settings: Settings,
        *,
        runner: Runner | None = None,
        content: ContentSettings | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store, self.queue, self.registry, self.settings = store, queue, registry, settings
        self._runner, self._content = runner, content
        self.clock = clock
        self._health: dict[str, PlatformHealth | None] = {}
        """The health this process last read or wrote per platform: while it is too recent to
        be replaced, a run need not read the store to learn so."""

    # -- start -------------------------------------------------------------------------------

    def validate(self, payload: Any) -> SearchRequest:
        if isinstance(payload, SearchRequest):
            payload = payload.model_dump(exclude_none=True)
        if not isinstance(payload, Mapping):
            raise InvalidRequest([Problem(field="body", problem="expected a JSON object")])
        reasons = {n: self.registry.unavailable_reason(n) for n in self.registry.names()}
        context = {
            "available": [n for n, r in reasons.items() if r is None],
            "unavailable": {n: r for n, r in reasons.items() if r is not None},
            "deadline_seconds": self.settings.deadline_seconds,
            "max_queries": self.settings.max_queries,
            "max_platforms": self.settings.max_platforms,
            "by_latency": self.by_latency,  # called only for a mode that picks the quickest
        }
        try:
            return SearchRequest.model_validate(dict(payload), context=context)
        except ValidationError as exc:
            raise InvalidRequest(problems_of(exc)) from None

    def by_latency(self, names: Sequence[str]) -> list[str]:
        """`names` quickest first, by this deployment's measurements (see health.py)."""
        priors = {n: self.registry.get(n).typical_latency_s for n in names}
        return health.by_latency(names, self.store.get_health(), priors)

    def start(self, payload: Any, *, caller: Caller | None = None) -> Accepted:
        """Validate, write the task and its platform documents, enqueue: 202's `Accepted`.

        `caller` is the verified caller (None: in-process, as the embedded runtime and the
        Python API are): its subject owns the search, and its quotas apply (admission.py),
        checked before anything is written.
        """
        request = self.validate(payload)
        now = self.clock()
        if caller is not None:
            admission.admit(self.store, caller, self.settings, now)
        owner = caller.subject if caller is not None else None
        task_id = uuid.uuid4().hex
        names = request.platforms
        budget = request.timeout_s or self.settings.deadline_seconds
        task = Task(
            task_id=task_id,
            owner=owner,
            request=request,
            queries=request.queries,
            platforms=names,
            fusion=request.fusion or fusers.DEFAULT_FUSION,
            progress=progress.queued(len(names)),
            created_at=now,
            updated_at=now,
            deadline_at=now + timedelta(seconds=budget),
            expires_at=now + timedelta(minutes=self.settings.ttl_minutes),
        )
        runs = [
            PlatformRun(task_id=task_id, name=name, index=i, of=len(names), updated_at=now)
            for i, name in enumerate(names, 1)
        ]
        self.store.create(task, runs)
        try:
            for name in names:
                self.queue.enqueue_platform(PlatformMessage(task_id=task_id, platform=name))
            self._enqueue_deadline(task)
        except Exception as exc:
            # The task is written but cannot run: finalize it as failed rather than leave it.
            log.exception("enqueue failed for %s", task_id)
            self.store.transact(task_id, None, lifecycle.finalize(self.clock(), force=True))
            raise QueueUnavailable(f"could not enqueue the search: {exc}") from exc
        return Accepted(
            task_id=task_id,
            status=task.status,
            status_url=self.status_url(task_id),
            cancel_url=self.cancel_url(task_id),
        )

    def status_url(self, task_id: str) -> str:
        base = self.settings.status_url_base or self.settings.function_urls.get("search_status")
        return f"{base.rstrip('/')}/{task_id}" if base else f"fanfuse://searches/{task_id}"

    def cancel_url(self, task_id: str) -> str | None:
        """`cancel_search?task_id=...`: a POST there cancels, with no body to build."""
        base = self.settings.function_urls.get("cancel_search")
        return f"{base}?{urlencode({'task_id': task_id})}" if base else None

    # -- run_platform ----------------------------------------------------------------------

    async def run_platform(self, message: PlatformMessage) -> str:
        """Run one platform's stages; a no-op when it (or its task) is already terminal. Every
        line logged meanwhile names the task and the platform (logs.py)."""
        with logs.task_context(message.task_id, message.platform):
            return await self._run_platform(message)

    async def _run_platform(self, message: PlatformMessage) -> str:
        task_id, name = message.task_id, message.platform
        claimed = self.store.transact(task_id, [name], lifecycle.claim(name, self.clock()))
        if claimed is None:
            self._resume_fan_in(task_id)
            return "skipped"
        run = claimed.runs[0]
        task = self.store.get_task(task_id)
        if task is None:
            raise TaskNotFound(task_id)
        outcome = await self._execute(task, run)
        written = self.store.transact(
            task_id, [name], lifecycle.finish(name, outcome, self.clock())
        )
        self._observe_latency(name, outcome)
        if written is None or written.task is None:
            return "discarded"
        if written.task.counters.done == len(written.task.platforms):
            self.queue.enqueue_aggregate(AggregateMessage(task_id=task_id))
        return outcome.state.value

    async def _execute(self, task: Task, run: PlatformRun) -> lifecycle.Outcome:
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
        try:
            platform = self.registry.get(run.name)
            # The run path alone needs the stages, the content settings and the network layer:
            # imported here, so a status or start request never loads them at cold start.
            from fanfuse.content.compress import within_chars
            from fanfuse.content.settings import ContentSettings
            from fanfuse.net.runner import default_runner
            from fanfuse.stages import pipeline
            from fanfuse.stages.base import Reporter, StageRun

            self._runner = self._runner or default_runner()
            self._content = self._content or ContentSettings()
            planned = pipeline.plan(platform, params)
            reporter = Reporter(self.store, run, planned, self.settings.progress_interval)
            ctx = PlatformContext(
                settings=platform.load_settings(),
                runner=self._runner,
                record=record,
                report=reporter.step,
            )
            cache = self._cache(task, run.name, ctx.settings, params)
            stage_run = StageRun(platform, ctx, params, reporter, self._content, cache)
            remaining = (task.deadline_at - self.clock()).total_seconds()
            async with asyncio.timeout(max(remaining, 0.001)):
                hits = await pipeline.execute(
                    stage_run, planned, lambda: self._cancelled(task.task_id)
                )
            hits = within_chars(hits, self.settings.max_content_chars)
            state, error, message = PlatformState.SUCCEEDED, None, reporter.message
        except Cancelled:
            hits, state, error, message = [], PlatformState.CANCELLED, None, "Cancelled"
        except TimeoutError:
            hits, state = [], PlatformState.TIMED_OUT
            error, message = "no result before the deadline", "Timed out"
        except ProviderError as exc:
            hits, state, error, message = [], PlatformState.FAILED, str(exc), ""
        except Exception as exc:  # a platform's bug must not stop the fan-in
            log.exception("platform %s failed", run.name)
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
        )

    def _cache(
        self, task: Task, name: str, settings: PlatformSettings, params: SearchParams
    ) -> QueryCache:
        """The cache as this run uses it: the platform's TTL, else the deployment's."""
        from fanfuse.cache import QueryCache, settings_fingerprint

        ttl = settings.cache_ttl
        return QueryCache(
            self.store,
            platform=name,
            fingerprint=settings_fingerprint(settings),
            language=params.language,
            include_content=params.include_content,
            options=params.options,
            limit=params.limit,
            ttl_s=self.settings.cache_ttl_seconds if ttl is None else ttl,
            mode=task.request.cache,
            clock=self.clock,
        )

    def _observe_latency(self, name: str, outcome: lifecycle.Outcome) -> None:
        """Fold a run's searching time into the platform's health. Only runs that asked the
        provider count (a cache hit or a failure says nothing of its latency), and health is
        advice: a store error here is logged, never the run's failure."""
        seconds = outcome.timings.get(Stage.SEARCHING.value)
        hit = outcome.cache is not None and outcome.cache.state is CacheState.HIT
        if outcome.state is not PlatformState.SUCCEEDED or seconds is None or hit:
            return
        now = self.clock()
        if name in self._health and not health.due(self._health[name], now):
            return
        try:
            previous = self.store.get_health().get(name)
            update = health.observed(previous, name, seconds, now)
            if update is not None:
                self.store.put_health(update)
            self._health[name] = update or previous
        except Exception:
            log.warning("could not record %s's latency", name, exc_info=True)

    def _resume_fan_in(self, task_id: str) -> None:
        """A redelivery after the fan-in committed but its aggregate enqueue failed: enqueue it
        again (the task name makes a second enqueue harmless) instead of waiting for the deadline.
        """
        task = self.store.get_task(task_id)
        if (
            task is not None
            and not task.status.terminal
            and all(r.state.terminal for r in self.store.get_runs(task_id))
        ):
            self.queue.enqueue_aggregate(AggregateMessage(task_id=task_id))

    def resume_unfinished(self) -> int:
        """Enqueue again what a previous process of this runtime left unfinished: the runs not
        yet terminal, and the deadline (which still holds). Returns how many searches."""
        tasks = self.store.recoverable()
        for task in tasks:
            for run in self.store.get_runs(task.task_id):
                if not run.state.terminal:
                    self.queue.enqueue_platform(
                        PlatformMessage(task_id=task.task_id, platform=run.name)
                    )
            self._enqueue_deadline(task)
        return len(tasks)

    def _enqueue_deadline(self, task: Task) -> None:
        self.queue.enqueue_aggregate(
            AggregateMessage(task_id=task.task_id, deadline=True),
            at=task.deadline_at + DEADLINE_GRACE,
        )

    def _cancelled(self, task_id: str) -> bool:
        task = self.store.get_task(task_id)
        return task is None or task.status is TaskStatus.CANCELLED

    # -- aggregate, status, cancel -----------------------------------------------------------

    async def aggregate(self, message: AggregateMessage) -> str:
        """Finalize exactly once: a no-op when terminal, or still running before the deadline."""
        task = self.store.get_task(message.task_id)
        if task is None:
            raise TaskNotFound(message.task_id)
        if task.status.terminal:
            return "already_final"
        reranked = await self._rerank(task, message.deadline) if task.request.reranks else None
        written = self.store.transact(
            message.task_id,
            None,
            lifecycle.finalize(self.clock(), force=message.deadline, reranked=reranked),
        )
        if written is None:
            latest = self.store.get_task(message.task_id)
            return "already_final" if latest and latest.status.terminal else "waiting"
        return written.task.status.value if written.task else "finalized"

    async def _rerank(self, task: Task, force: bool) -> dict[int, RerankOrder] | None:
        """Each query's candidate pool reranked, when the search is due to be finalized.

        Runs before the finalizing transaction, which must stay short; if a straggler lands in
        between, the orders still apply (a result they do not name keeps its fused place).
        """
        runs = self.store.get_runs(task.task_id)
        if not lifecycle.finalization_due(task, runs, self.clock(), force=force):
            return None
        from fanfuse.rerank.choice import reranker_for

        reranker = reranker_for(self._runner)
        pools = aggregate.candidates(task, runs)
        orders = await asyncio.gather(
            *(reranker.order(task.queries[qi], pool.results) for qi, pool in enumerate(pools))
        )
        return dict(enumerate(orders))

    def status(self, task_id: str) -> TaskView:
        task = self.store.get_task(task_id)
        if task is None:
            raise TaskNotFound(task_id)
        runs = self.store.get_runs(task_id)
        view = TaskView.model_validate({**dict(task), "platform_runs": runs})
        if not task.status.terminal:
            view.progress = progress.merged(runs, view.progress)
            if any(r.state is not PlatformState.QUEUED for r in runs):
                view.status = TaskStatus.RUNNING
        elif task.request.include_content:
            self._attach_contents(view)
        return view

    def _attach_contents(self, view: TaskView) -> None:
        lists = [view.results, *(q.results for q in view.results_by_query)]
        ids = sorted({r.content_id for rs in lists for r in rs if r.content_id and not r.content})
        contents = self.store.get_contents(view.task_id, ids)
        for results in lists:
            for r in results:
                if r.content_id and r.content is None:
                    r.content = contents.get(r.content_id)

    def cancel(self, task_id: str) -> TaskView:
        self.store.transact(task_id, None, lifecycle.cancel(self.clock()))
        return self.status(task_id)
