"""A platform run with a fallback chain (`google|brave`): its members asked in turn, hedged.

One delivery asks the member whose turn it is (`PlatformRun.member`) for the queries no member
has answered yet. A member that cannot be asked (not configured here, its breaker open) is
passed over at once, with no call and its reason. Within the delivery the next member is asked
too when the one asked last has not answered after `hedge_after_s` (a hedge: the request's,
else the deployment's chain setting, else that member's recent p90), or when one fails while
another still runs; the first good answer is used and the others are cancelled (the calls they
made, recorded by the runner, stay on the run and the receipt). When every member the delivery
asked has failed for reasons that pass the turn (rules/chain.py), the run hands over: one
transaction records the members and moves the turn, giving up the lease (rules/handover.py),
and the next member is its own queued task, `{task_id}--{run}--{member}` on that member's queue
(its provider's rate), so a killed worker or a task delivered twice asks no member twice.

Every member runs through the executor (execute.py): the shared runner and its call records,
the provider's pace, the search's caps and budget (the run's share of the provider calls, shared
by its members; its money split by the members' estimates, pricing.ChainEstimate). Each member's
breaker and measured latency are its own (circuit.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from fanfuse.platforms import Registry
from fanfuse.platforms.pricing import ChainEstimate
from fanfuse.queue.port import PlatformMessage, TaskQueue
from fanfuse.rules import budget, chain, handover, health, lifecycle, limits, progress
from fanfuse.rules.lifecycle import Outcome
from fanfuse.rules.limits import Budget
from fanfuse.rules.mutations import Mutator
from fanfuse.service import ledger
from fanfuse.service.budgets import Budgets
from fanfuse.service.circuit import Circuit
from fanfuse.service.execute import Executor
from fanfuse.service.turn import Finished, Handover, Step, Turn
from fanfuse.settings import Settings
from fanfuse.store.ports import HealthStore, TaskDocuments
from fanfuse.wire.models import PlatformRun, Task, utcnow

__all__ = ["Chains", "Finished", "Handover", "Step", "finishing", "message_for"]

log = logging.getLogger(__name__)


def message_for(run: PlatformRun) -> PlatformMessage:
    """The task that runs `run` on its current turn (its first: the platform's own)."""
    return PlatformMessage(task_id=run.task_id, platform=run.name, member=handover.member_of(run))


def finishing(
    name: str, step: Outcome | Finished, now: datetime, token: str
) -> tuple[Outcome, Mutator]:
    """A run's outcome and the fan-in that records it: `lifecycle.finish`, or for a chain's
    last turn `handover.finish` (with its members)."""
    if isinstance(step, Finished):
        return step.outcome, handover.finish(name, step.outcome, step.ended, now, token)
    return step, lifecycle.finish(name, step, now, token)


class Chains:
    """The chains of one service: its store in two roles (the runs' documents; the platforms'
    health, for the hedge's p90), queue, executor (with the registry, settings and clock it
    holds), breakers and budgets."""

    def __init__(
        self,
        store: TaskDocuments,
        healths: HealthStore,
        queue: TaskQueue,
        executor: Executor,
        circuit: Circuit,
        budgets: Budgets,
    ) -> None:
        self.store, self.healths, self.queue, self.executor = store, healths, queue, executor
        self.circuit, self.budgets = circuit, budgets
        self.registry: Registry = executor.registry
        self.settings: Settings = executor.settings
        self.clock: Callable[[], datetime] = executor.clock

    # -- one delivery ---------------------------------------------------------------------

    async def run(
        self,
        task: Task,
        run: PlatformRun,
        stop: Callable[[], bool],
        abort: asyncio.Event | None = None,
    ) -> Step:
        """Ask the member whose turn it is (and, hedging, the next ones): see the module.
        `abort`, once set, cuts every member's calls in flight (a cancel in this process)."""
        queries = chain.pending(run, len(task.queries))
        hedge = self.hedge_after(task, run)
        share = limits.share(self.settings.max_provider_calls_per_search, run.of)
        calls = Budget(max(share - len(run.calls), 0))  # what earlier turns spent is spent
        shares = self._money_shares(task, run)
        turn = Turn(
            task,
            run,
            stop,
            queries=queries,
            calls=calls,
            shares=shares,
            executor=self.executor,
            circuit=self.circuit,
            note=self.note,
            unavailable=self.unavailable,
            abort=abort,
        )
        return await turn.play(hedge)

    def hedge_after(self, task: Task, run: PlatformRun) -> float | None:
        """Seconds before the next member is asked too (None: only on a failure): the
        request's `hedge_after_s`, else the deployment's for this chain, else `p90`, the
        recent p90 of the member whose turn it is (none until it has enough samples)."""
        asked = task.request.hedge_after_s
        if asked is None:
            setting = self.settings.chains.get(run.name)
            asked = setting.hedge_after_s if setting is not None else "p90"
        if asked == "off":
            return None
        if asked == "p90":
            try:
                measured = self.healths.get_health().get(run.chain[run.member])
            except Exception:  # health is advice: no hedge rather than no search
                log.warning("could not read %s's latency", run.name, exc_info=True)
                return None
            return health.p90(measured)
        return float(asked)

    def _money_shares(self, task: Task, run: PlatformRun) -> dict[str, float]:
        """Each member's part of the run's money (pricing.ChainEstimate.share); none without
        a budget."""
        if budget.share(task.cost, run.name) is None:
            return {}
        found = self.budgets.estimates(
            [run.name],
            len(task.queries),
            task.request.depth,
            task.request.include_content,
            {run.name: run.chain},
        )[run.name]
        if not isinstance(found, ChainEstimate):
            return {}
        return {name: found.share(name) for name in run.chain}

    def unavailable(self, name: str) -> str | None:
        """Why `name` cannot be asked here, or None: not deployed (no queue, no worker), or
        its settings, which are asked of the platform itself even where a deployed list says
        what is available: a worker decides by what it holds."""
        try:
            why = self.registry.unavailable_reason(name) or self.registry.get(name).availability()
        except (ImportError, KeyError) as exc:
            why = f"not installed here ({exc})"
        return f"not available here ({why})" if why else None

    def note(self, run: PlatformRun, message: str) -> None:
        """A chain's news on the run's document (`google: no answer after 0.5 s, brave asked
        too`), from its lease holder."""
        fields = {
            "message": progress.platform_message(run.index, run.of, run.name, message),
            "updated_at": utcnow().isoformat(),
        }
        try:
            self.store.patch_run(run.task_id, run.name, fields, lease=run.lease)
        except Exception:
            log.warning("could not write %s's progress", run.name, exc_info=True)

    # -- between deliveries ---------------------------------------------------------------

    def hand_over(self, task_id: str, run: PlatformRun, token: str, step: Handover) -> str:
        """Record the turn and enqueue the next member's task. If the enqueue fails after the
        write, this delivery fails and its queue delivers it again: that delivery's turn has
        passed, and `resume` enqueues the member whose turn it is."""
        mutate = handover.hand_over(
            run.name,
            token,
            ended=step.ended,
            following=step.following,
            partial=step.partial,
            calls=step.calls,
            message=step.message,
            now=self.clock(),
        )
        if self.store.transact(task_id, [run.name], mutate) is None:
            # ended or taken over meanwhile: the turn's calls still count (ledger.py)
            ledger.settle_late(
                self.store, self.budgets, task_id, run.name, token, step.calls, self.clock()
            )
            return "discarded"
        member = run.chain[step.following]
        self.queue.enqueue_platform(
            PlatformMessage(task_id=task_id, platform=run.name, member=member)
        )
        return "handed_over"

    def resume(self, task_id: str, name: str) -> None:
        """A delivery whose turn had passed: enqueue the member whose turn it is again, in case
        the hand-over's enqueue was lost (its task name, or the claim, makes a second harmless)."""
        run = next((r for r in self.store.get_runs(task_id) if r.name == name), None)
        if run is None or run.state.terminal or run.lease is not None:
            return
        member = handover.member_of(run)
        if member is not None:
            self.queue.enqueue_platform(
                PlatformMessage(task_id=task_id, platform=name, member=member)
            )
