"""start / run_platform / aggregate / status / cancel: one code path for both runtimes.

The service talks to a TaskStore and a TaskQueue port; the embedded runtime passes SQLite and an
in-process queue, the Cloud Functions pass Firestore and Cloud Tasks.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from fanfuse.fusion import fusers
from fanfuse.platforms import Registry
from fanfuse.queue.port import AggregateMessage, PlatformMessage, TaskQueue
from fanfuse.rules import aggregate, fan_in, handover, lifecycle, progress, spend, timeline
from fanfuse.rules.breaker import Gate, Verdict
from fanfuse.rules.mutations import Snapshot, Writes
from fanfuse.service import admission, chains, circuit, events, ledger
from fanfuse.service.budgets import Budgets
from fanfuse.service.catalog import Catalog
from fanfuse.service.execute import Executor
from fanfuse.service.heartbeat import Heartbeat
from fanfuse.service.pacing import Pacer
from fanfuse.settings import Settings
from fanfuse.store.ports import TaskStore
from fanfuse.support import logs
from fanfuse.tracing import delivery, spans
from fanfuse.wire.errors import (
    QueueUnavailable,
    StartTooSlow,
    TaskExpired,
    TaskNotFound,
)
from fanfuse.wire.models import (
    Accepted,
    CacheEntry,
    Caller,
    PlatformInfo,
    PlatformRun,
    PlatformState,
    SearchRequest,
    Task,
    TaskStatus,
    TaskView,
    utcnow,
)

if TYPE_CHECKING:
    from fanfuse.fusion.rerank_contract import RerankOrder
    from fanfuse.net.runner import Runner
    from fanfuse.settings.content import ContentSettings
    from fanfuse.settings.rerank import LlmRerankSettings

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
        rerank: LlmRerankSettings | None = None,
        clock: Callable[[], datetime] = utcnow,
        finalize_at_fan_in: bool = False,
    ) -> None:
        """`content` and `rerank`: the settings the composition root read from the environment
        (runtimes/); None: the content stages' defaults, and no LLM reranker. Nothing here reads
        the environment.

        `finalize_at_fan_in`: the last platform's fan-in finalizes the search itself, in its own
        transaction (`rules.fan_in`), when nothing slow is left to do (no reranker to call),
        instead of leaving it to the aggregate delivery. The cloud runtimes set it
        (runtimes/cloud.py, for GCP and AWS alike): there the aggregate task is a second trip
        through the queue and a function before the answer is final. The embedded runtime's
        queue is an asyncio task in the same process, whose hop costs next to nothing, and keeps
        the finalization in the aggregate delivery (`_fan_in_complete`)."""
        self.store, self.queue, self.registry, self.settings = store, queue, registry, settings
        self._finalize_at_fan_in = finalize_at_fan_in
        self.clock = clock
        if content is None:
            from fanfuse.settings.content import ContentSettings

            content = ContentSettings.model_construct()  # the defaults, not the environment
        self._rerank_settings = rerank
        self._budgets = Budgets(store, registry, settings)
        prices, pace = self._budgets.price, Pacer(store, clock).for_platform
        self._in_flight = ledger.InFlight()  # this process's runs, for a cancel to cut
        self._executor = Executor(
            store, store, registry, settings, clock, runner, content, prices=prices, pace=pace
        )
        self._circuit = circuit.Circuit(store, clock)
        self._chains = chains.Chains(
            store, store, queue, self._executor, self._circuit, self._budgets
        )
        self.events = events.Events()  # what the metrics count (service/events.py)
        self.catalog = Catalog(store, registry, settings)

    # -- start -------------------------------------------------------------------------------

    def _carrier(self, run: PlatformRun) -> str | None:
        """Whose queue carries a chain's first turn when its first member cannot run here
        (validation let it in because a later member can): that member's (queue/port.py)."""
        if not run.chain or self.registry.unavailable_reason(run.name) is None:
            return None
        return next((m for m in run.chain[1:] if self.registry.unavailable_reason(m) is None), None)

    def validate(self, payload: Any) -> SearchRequest:
        return self.catalog.validate(payload)

    def available(self) -> list[str]:
        return self.catalog.available()

    def platforms(self) -> list[PlatformInfo]:
        return self.catalog.platforms()

    def admit(self, caller: Caller | None) -> admission.Ticket:
        """Let `caller` start a search now, spending its token, or RateLimited (429): what a
        front does before it reads the body, so an invalid body costs a token too. None (in
        process) is not limited, nor is a `local` caller (fronts/mcp/access.py). The ticket's time
        is when the request arrived."""
        now = self.clock()
        ticket = admission.Ticket(caller=caller, at=now)
        spans.bind_task(ticket.task_id)
        with spans.span("admit", {spans.TASK_ID: ticket.task_id}):
            if caller is not None and caller.via != "local":
                admission.admit(self.store, caller, self.settings, now)
        return ticket

    def start(
        self,
        payload: Any,
        *,
        caller: Caller | None = None,
        ticket: admission.Ticket | None = None,
    ) -> Accepted:
        """Validate, write the task and its platform documents, enqueue: 202's `Accepted`.

        `caller` is the verified caller (None: in-process, as the embedded runtime and the
        Python API are): its subject owns the search, and its quotas apply (admission.py),
        before the payload is validated (an invalid one spends a token too) and before anything
        is written. A front that admitted the caller before reading the body passes its
        `ticket` instead, and no second token is taken. A `local` caller (an MCP server's one
        local user, fronts/mcp/access.py) owns its searches but, being in process, is not admitted.
        The deadline runs from admission, when the request arrived; see `_write` for a store too
        slow to leave time for the search.
        """
        if ticket is None:
            ticket = self.admit(caller)
        elif caller is not None:
            raise TypeError("start takes a caller or the ticket it was admitted with, not both")
        with logs.task_context(ticket.task_id), spans.span("start"):
            return self._start(payload, ticket)

    def _start(self, payload: Any, ticket: admission.Ticket) -> Accepted:
        request = self.validate(payload)
        now, caller = ticket.at, ticket.caller
        owner = caller.subject if caller is not None else None
        planned = self._budgets.plan(request, caller, now)  # refused: nothing written or sent
        task_id = ticket.task_id
        names = planned.platforms
        budget = request.timeout_s or self.settings.deadline_seconds
        task = Task(
            task_id=task_id,
            owner=owner,
            request=request,
            queries=request.queries,
            platforms=names,
            fusion=request.fusion or fusers.DEFAULT_FUSION,
            progress=progress.queued(len(names)),
            cost=planned.cost,
            created_at=now,
            updated_at=now,
            deadline_at=now + timedelta(seconds=budget),
            expires_at=now + timedelta(minutes=self.settings.ttl_minutes),
            trace=spans.traceparent(),
        )
        runs = [
            PlatformRun(task_id=task_id, name=name, index=i, of=len(names), updated_at=now)
            for i, name in enumerate(names, 1)
        ]
        for run in runs:  # a fallback chain's members (wire/selection.py)
            run.chain = request.chains.get(run.name, [])
        try:
            self._write(task, runs)
        except Exception:
            self._budgets.release(task)  # withdrawn: nothing of it runs
            raise
        try:
            self.queue.enqueue_platforms(
                [
                    PlatformMessage(task_id=task_id, platform=n, carrier=self._carrier(run))
                    for n, run in zip(names, runs, strict=True)
                ]
            )
            self._enqueue_deadline(task)
        except Exception as exc:
            # The task is written but cannot run: finalize it as failed rather than leave it.
            log.exception("enqueue failed for %s", task_id)
            self._finalized(
                self.store.transact(
                    task_id, None, timeline.finalize(self.clock(), force=True, by="start")
                )
            )
            raise QueueUnavailable(f"could not enqueue the search: {exc}") from exc
        return Accepted(
            task_id=task_id,
            status=task.status,
            status_url=self.status_url(task_id),
            cancel_url=self.cancel_url(task_id),
        )

    def _write(self, task: Task, runs: list[PlatformRun]) -> None:
        """Create the task, or leave nothing: a failed create (a timed-out commit may still
        land) and a create that left too little of the budget (StartTooSlow, 503) withdraw it,
        before anything is enqueued. Past that check the enqueues are quick and the search runs.
        """
        try:
            self.store.create(task, runs)
        except Exception:
            self._withdraw(task.task_id)
            raise
        now = self.clock()
        if lifecycle.too_late_to_start(task, now, self.settings.start_min_budget_fraction):
            self._withdraw(task.task_id)
            took = (now - task.created_at).total_seconds()
            budget = (task.deadline_at - task.created_at).total_seconds()
            raise StartTooSlow(
                f"storage took {took:.1f} s of the search's {budget:g} s; nothing was kept, "
                "try again",
                retry_after_s=took,
            )

    def _withdraw(self, task_id: str) -> None:
        """Best effort: if the store fails here too, the never-enqueued task stays `queued`
        until its expiry purge (status answers it; nothing runs it)."""
        try:
            self.store.withdraw(task_id)
        except Exception:
            log.warning("could not withdraw refused search %s", task_id, exc_info=True)

    def status_url(self, task_id: str) -> str:
        base = self.settings.status_url_base or self.settings.function_urls.get("search_status")
        return f"{base.rstrip('/')}/{task_id}" if base else f"fanfuse://searches/{task_id}"

    def cancel_url(self, task_id: str) -> str | None:
        """`cancel_search?task_id=...`: a POST there cancels, with no body to build."""
        base = self.settings.function_urls.get("cancel_search")
        return f"{base}?{urlencode({'task_id': task_id})}" if base else None

    # -- run_platform ----------------------------------------------------------------------

    @logs.in_task_context  # every line logged meanwhile names the task and the platform
    @delivery.handled("run_platform")  # its span, in the search's trace
    async def run_platform(self, message: PlatformMessage) -> str:
        """Run one platform's stages; a no-op when it (or its task) is already terminal."""
        task_id, name = message.task_id, message.platform
        token = uuid.uuid4().hex  # this delivery's lease token (see lifecycle.claim)
        lease = timedelta(seconds=self.settings.lease_seconds)
        seen, unsaved = list[Task](), list[CacheEntry]()  # the claim's read; the cache's writes
        claim = handover.claim(name, message.member, self.clock(), token, lease=lease)

        def claiming(snap: Snapshot) -> Writes | None:  # the task it read: no second read
            seen.append(snap.task)
            return claim(snap)

        claiming.__qualname__ = claim.__qualname__  # the rule it runs (a trace's span name)
        claimed = self.store.transact(task_id, [name], claiming)
        if claimed is None:
            self._resume_fan_in(task_id)
            self._chains.resume(task_id, name)  # a turn that has passed: the next one's task
            return "skipped"
        run, task = claimed.runs[0], seen[-1]
        working, queued = self.clock(), delivery.delivered().enqueued_at  # for the timeline
        checks = itertools.count()
        abort = self._in_flight.enter(task_id)  # a cancel here cuts the calls in flight
        try:
            async with Heartbeat(
                self.store, task_id, name, token, lease, self.clock, on_lost=abort.set
            ) as beat:

                def stop() -> bool:  # the lease went to another delivery, or a cancel (the
                    # claim has just read the task: the first check reads it again no sooner)
                    return beat.lost or (next(checks) > 0 and self._cancelled(task_id))

                step, gate = await self._guarded(task, run, stop, abort, unsaved)
        except asyncio.CancelledError:
            # This process is stopping mid-run: hand the run back rather than hold it until the
            # lease lapses (a restarted embedded runtime resumes it at once).
            self.store.transact(task_id, [name], lifecycle.release(name, token))
            raise
        finally:
            self._in_flight.leave(task_id, abort)
        if isinstance(step, chains.Handover):  # the chain's next member: its own task
            return self._chains.hand_over(task_id, run, token, step)
        outcome, counted_by = chains.finishing(name, step, self.clock(), token)
        last = self._finalize_at_fan_in  # the last fan-in finalizes too (rules/fan_in.py)
        finish = fan_in.fan_in(name, counted_by, self.clock(), queued, working, finalize=last)
        written = self.store.transact(task_id, [name], finish)
        if written is None or written.task is None:  # ended or taken over meanwhile
            ledger.settle_late(
                self.store, self._budgets, task_id, name, token, outcome.calls, self.clock()
            )
        try:  # the search's end before the breaker and health: the answer waits for it, not those
            counted = written.task if written is not None else None
            if counted is not None and counted.status.terminal:
                self._finalized(Writes(task=counted))  # at its fan-in (its run: counted below)
            elif counted is not None and counted.counters.done == len(counted.platforms):
                self._fan_in_complete(counted)
        finally:
            self._executor.save_cache(unsaved)  # the run's cache entries, once it is counted
            if gate is not None:  # a chain's members were recorded one by one (chains.py)
                self._circuit.record(name, outcome, gate)
            if not run.chain:
                self._circuit.observe_latency(name, outcome)
            self.events.runs_ended(written.runs if written is not None else [])
        if written is None or written.task is None:
            return "discarded"
        return outcome.state.value

    async def _guarded(
        self,
        task: Task,
        run: PlatformRun,
        stop: Callable[[], bool],
        abort: asyncio.Event | None = None,
        unsaved: list[CacheEntry] | None = None,
    ) -> tuple[lifecycle.Outcome | chains.Step, Gate | None]:
        """The run behind its platform's shared breaker (circuit.py): a suspended platform is
        answered at once, with no provider call, instead of spending the search's deadline. The
        outcome is recorded in the breaker after the fan-in (`run_platform`), off the path of
        the answer. A fallback chain's members each stand behind their own (chains.py): no gate
        here."""
        if run.chain:
            return await self._chains.run(task, run, stop, abort), None
        gate = self._circuit.admit(run.name)
        if gate.verdict is Verdict.SUSPENDED:
            return circuit.suspended(run.name, gate), gate
        return await self._executor.run(task, run, stop, abort=abort, unsaved=unsaved), gate

    def _fan_in_complete(self, task: Task) -> None:
        """Every platform has ended and the fan-in did not finalize (a mode that reranks, or a
        runtime that leaves it to the aggregate task): enqueue the aggregate task, which does.
        Its transaction (`lifecycle.finalize`, only from a non-terminal status): with a deadline
        task or a redelivery, still exactly one finalization."""
        self.queue.enqueue_aggregate(AggregateMessage(task_id=task.task_id))

    def _resume_fan_in(self, task_id: str) -> None:
        """A redelivery after the fan-in committed but its aggregate enqueue failed: do it again
        (the task name makes a second enqueue harmless) instead of waiting for the deadline."""
        task = self.store.get_task(task_id)
        if (
            task is not None
            and not task.status.terminal
            and all(r.state.terminal for r in self.store.get_runs(task_id))
        ):
            self._fan_in_complete(task)

    def resume_unfinished(self) -> int:
        """What this resident process left unfinished before a restart (`store.recoverable`:
        its own searches only): within the deadline, the runs not yet terminal are enqueued
        again, and the deadline (which still holds); past it, the search is finalized at once
        with what it has, and no provider is called: nobody can use a late answer. Returns how
        many searches were resumed or finalized."""
        tasks = self.store.recoverable()
        for task in tasks:
            now = self.clock()
            if task.deadline_at <= now:
                self._finalized(
                    self.store.transact(task.task_id, None, timeline.finalize(now, force=True))
                )
                continue
            for run in self.store.get_runs(task.task_id):
                if not run.state.terminal:
                    if run.lease is not None:  # held by this process's previous life: gone
                        release = lifecycle.release(run.name, run.lease)
                        self.store.transact(task.task_id, [run.name], release)
                    self.queue.enqueue_platform(chains.message_for(run))
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

    @logs.in_task_context  # every line logged meanwhile names the task
    @delivery.handled("aggregate")
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
            timeline.finalize(self.clock(), force=message.deadline, reranked=reranked),
        )
        if written is None:
            latest = self.store.get_task(message.task_id)
            return "already_final" if latest and latest.status.terminal else "waiting"
        self._finalized(written)
        return written.task.status.value if written.task else "finalized"

    def _finalized(self, written: Writes | None) -> None:
        """After the one write that made a search terminal: its events and its ended runs'
        (events.py), and its daily reservation settled to what it cost (budgets.py)."""
        if written is not None:
            self.events.runs_ended(written.runs)  # stragglers timed out, or cancelled
            self.events.search_ended(written.task)
            if written.task is not None and written.task.status.terminal:
                self._budgets.settle(written.task)

    async def _rerank(self, task: Task, force: bool) -> dict[int, RerankOrder] | None:
        """Each query's candidate pool reranked, when the search is due to be finalized.

        Runs before the finalizing transaction, which must stay short; if a straggler lands in
        between, the orders still apply (a result they do not name keeps its fused place).
        """
        runs = self.store.get_runs(task.task_id)
        if not lifecycle.finalization_due(task, runs, self.clock(), force=force):
            return None
        from fanfuse.rerank.choice import reranker_for
        from fanfuse.settings.rerank import LlmRerankSettings

        llm = self._rerank_settings or LlmRerankSettings.model_construct()  # no endpoint
        reranker = reranker_for(llm, self._executor.made_runner)
        pools = aggregate.candidates(task, runs)
        orders = await asyncio.gather(
            *(reranker.order(task.queries[qi], pool.results) for qi, pool in enumerate(pools))
        )
        return dict(enumerate(orders))

    def status(self, task_id: str) -> TaskView:
        """The task merged with its platform documents (while it runs, with the `preview` fused
        from them); TaskNotFound, or TaskExpired (410, and nothing of the document) past its
        `expires_at`."""
        task = self.store.get_task(task_id)
        if task is None:
            raise TaskNotFound(task_id)
        if lifecycle.expired(task, self.clock()):
            raise TaskExpired(task_id, task.owner)
        runs = self.store.get_runs(task_id)
        view = TaskView.model_validate({**dict(task), "platform_runs": runs})
        if not task.status.terminal:
            view.progress = progress.merged(runs, view.progress)
            if any(r.state is not PlatformState.QUEUED for r in runs):
                view.status = TaskStatus.RUNNING
            view.preview = aggregate.preview(task, runs)
            view.cost = spend.receipt(task.cost, runs)  # so far: finalizing writes the sum
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
        self._finalized(self.store.transact(task_id, None, timeline.cancel(self.clock())))
        self._in_flight.abort(task_id)  # its runs in this process stop calling at once
        return self.status(task_id)
