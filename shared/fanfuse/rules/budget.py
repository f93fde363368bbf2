"""Budgets: a plan's estimated cost against its cap (refuse, or trim the dearest platforms), and
a caller's daily spend, kept in the store like the quota buckets (pure functions).

The per-request cap
-------------------
A search's plan is priced before any call (platforms/pricing.py: an upper bound per platform).
Over the request's `max_cost_usd` (or the deployment's default cap) the start is refused with a
400 that states the estimate and how to fit, before anything is written or sent; with
`budget: "trim"` the dearest platforms are dropped first until the rest fit, and the receipt
names them (`Cost.trimmed`). During the run each platform gets the part of the cap its estimate
is of the plan's (`share`), which stops its paging once spent (pricing.cost_budget).

The daily budget
----------------
An API key may carry a daily budget (`fanfuse keys create --daily-budget-usd`). The budget is
the key's own: two keys of one owner with two budgets keep two figures (`day_key`), while the
searches of both belong to the owner. Its spend is one document a UTC day,
`{owner}$key-{key_id}$spend-YYYYMMDD`, held in the quota store and written by the very same
one-document read-modify-write as the start-rate buckets (`QuotaStore.take_quota`, run by SQLite
in one BEGIN IMMEDIATE, by Firestore in a transaction, by DynamoDB with a conditional put): its
`tokens` are the dollars spent that day. A start reserves its estimate (`reserve`): the write
happens only while the reservations fit the budget, so concurrent starts across processes are
each counted exactly once and never overdraw it. The estimate bounds what the search's calls
can cost (each platform's calls stop at its share: `share`). When the search ends (finalized or
cancelled, which happens once) the reservation is settled to its receipt (`adjust`), which
counts every call the provider may bill, those still in flight included (rules/spend.py: each
priced call is held on its platform document before it is sent); a worker that answers after
that settles its calls into the receipt, and the day by the difference. So the day's figure is
the spend, not the estimates, and no call is released while it may still be billed. A lost
settlement leaves the estimate counted, which errs on the safe side. The document expires a
day after its day ends (TTL, SQLite's sweep).

A key's day document is written about once per search it starts, so the start rate (a key's
`rate_per_minute`, default 30 a minute) keeps it well under Firestore's one write a second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from fanfuse.rules.mutations import QuotaMutator
from fanfuse.rules.quota import bucket_key
from fanfuse.wire.cost import Cost, usd
from fanfuse.wire.models import QuotaBucket

EPSILON = 1e-9
"""Dollars summed as floats: a plan that costs exactly its cap fits."""


@dataclass(frozen=True)
class Fit:
    """The plan a budget lets run: the platforms kept (request order) and those trimmed."""

    kept: list[str]
    trimmed: list[str]
    estimate_usd: float


def fits(total: float, cap: float | None) -> bool:
    return cap is None or total <= cap + EPSILON


def trim(estimates: Mapping[str, float], order: Sequence[str], cap: float) -> Fit:
    """Drop the dearest platforms first (of two as dear, the later in the request) until the
    rest fit `cap`; free platforms are never dropped. May keep none (nothing fits)."""
    kept = list(order)
    trimmed: list[str] = []
    by_price = sorted(
        (n for n in order if estimates.get(n, 0.0) > 0),
        key=lambda n: (-estimates[n], -order.index(n)),
    )
    for name in by_price:
        if fits(sum(estimates.get(n, 0.0) for n in kept), cap):
            break
        kept.remove(name)
        trimmed.append(name)
    return Fit(kept=kept, trimmed=trimmed, estimate_usd=sum(estimates.get(n, 0.0) for n in kept))


def refusal(
    estimates: Mapping[str, float],
    order: Sequence[str],
    cap: float,
    by_mode: Mapping[str, float],
) -> str:
    """Why a plan is refused and how to fit: its estimate (dearest platforms first), the
    platforms to drop, the modes whose estimate fits, and `budget: "trim"`."""
    total = sum(estimates.get(n, 0.0) for n in order)
    dear = sorted((n for n in order if estimates.get(n, 0.0) > 0), key=lambda n: -estimates[n])
    parts = ", ".join(f"{n} {usd(estimates[n])}" for n in dear)
    ways: list[str] = []
    fit = trim(estimates, order, cap)
    if fit.kept and fit.trimmed:
        ways.append(f"leave out {', '.join(fit.trimmed)} ({usd(fit.estimate_usd)})")
    modes = [f"mode {m} ({usd(v)})" for m, v in by_mode.items() if fits(v, cap)]
    if modes:
        ways.append(" or ".join(modes))
    if fit.kept and fit.trimmed:
        ways.append('send budget: "trim" to drop the dearest platforms')
    if not ways:
        ways.append("raise max_cost_usd, or choose free platforms")
    return (
        f"the estimated cost {usd(total)} ({parts}) is over max_cost_usd {usd(cap)}; "
        f"to fit: {'; '.join(ways)}"
    )


def chain_note(chains: Sequence[Sequence[str]]) -> str:
    """What a refusal says of the fallback chains in its plan: how they were priced."""
    spelled = ", ".join("|".join(chain) for chain in chains)
    return (
        f"a fallback chain ({spelled}) is estimated at its dearest plausible path, every "
        "member asked and charged (a hedge asks two at once)"
    )


def share(cost: Cost, name: str) -> float | None:
    """`name`'s part of the search's money, which stops its paging once spent. Under a cap
    alone: the part its estimate is of the plan's, of the cap (at least its estimate, since the
    plan fits). Under a daily budget, with a cap or without: its estimate, since that is what
    was reserved for it on the key's day, and paging past it would spend money the day never
    held. None: no budget, or a free platform."""
    held = cost.budget
    own = cost.platforms[name].estimate_usd if name in cost.platforms else 0.0
    if own <= 0 or (held.max_cost_usd is None and held.daily_budget_usd is None):
        return None
    if held.daily_budget_usd is not None or held.max_cost_usd is None or cost.estimate_usd <= 0:
        return own
    return max(own, held.max_cost_usd * own / cost.estimate_usd)


# -- the daily budget --------------------------------------------------------------------------


def day_key(subject: str, now: datetime, key_id: str | None = None) -> str:
    """The spend document for `now`'s UTC day of API key `key_id` of `subject` (None: of the
    subject, a caller with no key): beside the quota shards (`#i`), never one of them (`$` is
    quoted in a subject). A daily budget is its key's: two keys of one owner, each with its
    own budget, keep two figures."""
    holder = bucket_key(subject)
    if key_id is not None:
        holder += f"$key-{bucket_key(key_id)}"
    return f"{holder}$spend-{now:%Y%m%d}"


def day_end(now: datetime) -> datetime:
    """When `now`'s UTC day ends (the budget is whole again)."""
    start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return start + timedelta(days=1)


def _spent(bucket: QuotaBucket | None) -> float:
    return bucket.tokens if bucket is not None else 0.0


def reserve(amount: float, daily: float, now: datetime) -> QuotaMutator:
    """Reserve `amount` of today's `daily` budget: the bucket to write and None when it fits,
    else nothing to write and the dollars left today (pure: a store may run it again)."""

    def mutate(bucket: QuotaBucket | None) -> tuple[QuotaBucket | None, float | None]:
        spent = _spent(bucket)
        if spent + amount > daily + EPSILON:
            return None, max(0.0, daily - spent)
        return _written(spent + amount, now), None

    return mutate


def adjust(delta: float, now: datetime) -> QuotaMutator:
    """Settle a reservation: add `delta` (what the search cost less what it reserved; negative
    gives back) to the day's spend, never below zero. Always writes: the money is spent."""

    def mutate(bucket: QuotaBucket | None) -> tuple[QuotaBucket | None, float | None]:
        return _written(max(0.0, _spent(bucket) + delta), now), None

    return mutate


def _written(spent: float, now: datetime) -> QuotaBucket:
    return QuotaBucket(
        tokens=round(spent, 9), updated_at=now, expires_at=day_end(now) + timedelta(days=1)
    )
