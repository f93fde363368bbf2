"""The money side of a start and of a search's end: price the plan, hold it to the request's
cap (refuse, or trim the dearest platforms), reserve it from the caller's daily budget, and
settle the reservation to what the search did cost once it is over.

The rules are pure (rules/budget.py, platforms/pricing.py); this is where they meet the
registry, the deployment's settings and the quota store. Everything here runs in the start path
after the body is validated and before anything is written: a refusal writes nothing and sends
nothing. A search with no cap and no daily budget pays only the estimate (prices are read once
per platform and kept).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fanfuse.platforms import Registry
from fanfuse.platforms.pricing import (
    ChainEstimate,
    PlatformEstimate,
    chain_estimate,
    estimate,
    price_of,
    readable_settings,
)
from fanfuse.rules import budget, limits
from fanfuse.settings import Settings
from fanfuse.store.ports import QuotaStore
from fanfuse.tracing import spans
from fanfuse.wire.cost import Cost, CostBudget, PlatformCost, Price, usd
from fanfuse.wire.errors import BudgetSpent, OverBudget
from fanfuse.wire.models import Caller, QuotaBucket, SearchRequest, Task
from fanfuse.wire.modes import MODES

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Planned:
    """What a start may run: the platforms kept, and the receipt's opening (estimate, budget,
    trimmed platforms), which the finalization completes with what was spent."""

    platforms: list[str]
    cost: Cost


class Budgets:
    def __init__(self, store: QuotaStore, registry: Registry, settings: Settings) -> None:
        self.store, self.registry, self.settings = store, registry, settings
        self._known: dict[str, tuple[Price, Any]] = {}

    def _platform(self, name: str) -> tuple[Price, Any]:
        """`name`'s price here and its settings (None: not readable here), read once: both
        change only with the deployment, and reading a platform's settings that do not validate
        reads the environment again each time."""
        found = self._known.get(name)
        if found is None:
            platform = self.registry.get(name)
            settings = readable_settings(platform)
            price = price_of(platform, self.settings.prices)
            found = self._known[name] = (price, settings)
        return found

    def price(self, name: str) -> Price:
        """`name`'s price here (pricing.price_of)."""
        return self._platform(name)[0]

    def estimates(
        self,
        names: Sequence[str],
        queries: int,
        depth: int,
        include_content: bool,
        chains: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, PlatformEstimate | ChainEstimate]:
        """Each platform's most expensive run of the plan, with its share of the call cap; a
        fallback chain (`chains`: a run -> its members) at its dearest plausible path."""
        cap = limits.share(self.settings.max_provider_calls_per_search, len(names))

        def one(name: str) -> PlatformEstimate:
            return estimate(
                self.registry.get(name),
                *self._platform(name),
                queries=queries,
                depth=depth,
                include_content=include_content,
                call_cap=cap,
            )

        found: dict[str, PlatformEstimate | ChainEstimate] = {}
        for n in names:
            chain = (chains or {}).get(n)
            found[n] = chain_estimate(n, [one(m) for m in chain]) if chain else one(n)
        return found

    def _priced(self, request: SearchRequest, names: Sequence[str]) -> dict[str, float]:
        found = self.estimates(
            names, len(request.queries), request.depth, request.include_content, request.chains
        )
        return {n: e.usd for n, e in found.items()}

    @spans.traced("budget")
    def plan(self, request: SearchRequest, caller: Caller | None, now: datetime) -> Planned:
        """The platforms this start may run and its receipt's opening, or OverBudget (400) /
        BudgetSpent (429): a refusal has written nothing. Reserves the estimate from the
        caller's daily budget (its one write), which `settle` or `release` later adjusts."""
        names = list(request.platforms)
        cap, source = request.max_cost_usd, "request"
        if cap is None and self.settings.max_cost_usd is not None:
            cap, source = self.settings.max_cost_usd, "deployment"
        estimates = asked = self._priced(request, names)
        trimmed: list[str] = []
        if cap is not None and not budget.fits(sum(estimates.values()), cap):
            if request.budget == "refuse":
                raise self._over(request, names, asked, cap)
            # Fewer platforms get larger shares of the call cap, so a trimmed plan is priced
            # again with its own count, and trimmed again if that put it over (at most once a
            # platform: each round drops at least one).
            while not budget.fits(sum(estimates.values()), cap):
                fit = budget.trim(estimates, names, cap)
                if not fit.kept or not fit.trimmed:
                    raise self._over(request, list(request.platforms), asked, cap)
                # a chain is named as spelled: its estimate was its dearest plausible path
                trimmed += ["|".join(request.chains.get(n, [n])) for n in fit.trimmed]
                names = fit.kept
                estimates = self._priced(request, names)
        total = sum(estimates.values())
        daily = caller.daily_budget_usd if caller is not None else None
        spent = None
        key_id = caller.key_id if caller is not None and daily is not None else None
        if caller is not None and daily is not None and total > 0:  # a free plan reserves nothing
            spent = self._reserve(caller.subject, key_id, total, daily, now)
        chains = request.chains
        return Planned(
            platforms=names,
            cost=Cost(
                platforms={
                    n: PlatformCost(estimate_usd=round(estimates[n], 6), chain=chains.get(n, []))
                    for n in names
                },
                estimate_usd=round(total, 6),
                budget=CostBudget(
                    max_cost_usd=cap,
                    source=source if cap is not None else None,
                    policy=request.budget,
                    daily_budget_usd=daily,
                    daily_spent_usd=spent,
                    key_id=key_id,
                ),
                trimmed=trimmed,
            ),
        )

    def _over(
        self, request: SearchRequest, names: list[str], estimates: dict[str, float], cap: float
    ) -> OverBudget:
        by_mode: dict[str, float] = {}
        chains = request.chains
        for mode, spec in MODES.items():
            if mode == request.mode:
                continue
            content = request.include_content
            if "include_content" not in request.model_fields_set and spec.content is not None:
                content = spec.content
            found = self.estimates(
                names, len(request.queries), spec.depth(request.max_results), content, chains
            )
            by_mode[mode.value] = sum(e.usd for e in found.values())
        total = sum(estimates.values())
        message = budget.refusal(estimates, names, cap, by_mode)
        chained = [n for n in names if n in chains]
        if chained:
            message += "; " + budget.chain_note([chains[n] for n in chained])
        return OverBudget(message, total)

    def _reserve(
        self, subject: str, key_id: str | None, amount: float, daily: float, now: datetime
    ) -> float:
        """Reserve `amount` of the key's day, or BudgetSpent; the day's spend before it."""
        before: list[float] = []
        reserve = budget.reserve(amount, daily, now)

        def mutate(bucket: QuotaBucket | None) -> tuple[QuotaBucket | None, float | None]:
            before.append(bucket.tokens if bucket is not None else 0.0)
            return reserve(bucket)

        left = self.store.take_quota(budget.day_key(subject, now, key_id), mutate)
        if left is not None:
            wait = (budget.day_end(now) - now).total_seconds()
            raise BudgetSpent(
                f"the estimated cost {usd(amount)} is over what is left of this key's "
                f"daily budget of {usd(daily)} ({usd(left)} left today); fewer "
                "platforms or another mode cost less, or retry after the UTC day ends",
                wait,
            )
        return round(before[-1], 6)

    def release(self, task: Task) -> None:
        """Give back a start's whole reservation (its task was withdrawn, never run)."""
        self.adjust(task, -task.cost.estimate_usd)

    def settle(self, task: Task) -> None:
        """Settle a terminal task's reservation to what it cost: called once per search, after
        the one write that made it terminal (finalized or cancelled). Its receipt counts the
        calls still in flight then (rules/spend.py), so their money stays counted."""
        self.adjust(task, task.cost.total_usd - task.cost.estimate_usd)

    def adjust(self, task: Task, delta: float) -> None:
        """Add `delta` to the day `task` was reserved from: a settlement, or what a late
        worker's calls changed in its terminal receipt (ledger.py)."""
        if task.cost.budget.daily_budget_usd is None or task.owner is None or not delta:
            return
        # The day the reservation was made, of the key it was made from.
        key = budget.day_key(task.owner, task.created_at, task.cost.budget.key_id)
        try:
            self.store.take_quota(key, budget.adjust(delta, task.created_at))
        except Exception:  # the estimate stays counted: errs on the safe side
            log.warning("could not settle the daily spend of %s", task.task_id, exc_info=True)
