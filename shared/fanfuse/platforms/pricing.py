"""What a platform's provider calls cost: its price, a call's charge, a plan's estimate.

Each platform module declares its provider's public list price (`Platform.list_price`, dated
with its source in docs/platforms.md; free and offline platforms cost 0), possibly by the tier
its settings choose (`Platform.price`); a deployment overrides any field of it by platform name
(`Settings.prices`, built at the composition root and passed down like every setting).

Charging follows the price lists: a request is charged when the provider answered it with a 2xx
(the runner records `per_request_usd` on its `CallRecord`), and a page of results adds what its
results cost past those the request includes (`per_result_usd`) and, when the search asked for
content, each page content the provider fetched (`per_content_usd`). A request that failed is
not charged: every provider here bills successful requests only.

The estimate is an upper bound of the same charges for a plan: each platform's planned requests
(`Platform.planned_calls`: queries x pages at the mode's depth, a multi-query platform's one call,
a strategy's supplemental queries), at most its share of the per-search call cap (limits.py),
each at the dearest a request can cost (every result past the included ones charged, every one
with content). The admission checks it before any call (rules/budget.py); during the run a
platform's share of the budget, in the calls it affords, stops its paging (`cost_budget`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from fanfuse.platforms.contract import Platform
from fanfuse.rules import limits
from fanfuse.rules.limits import Budget
from fanfuse.wire.cost import Price
from fanfuse.wire.models import Hit


def readable_settings(platform: Platform[Any]) -> Any:
    """`platform`'s settings, or None where this process cannot read them (a start_search that
    holds no provider keys: the platforms run elsewhere)."""
    try:
        return platform.settings()
    except ValidationError:
        return None


def price_of(platform: Platform[Any], overrides: Mapping[str, Price]) -> Price:
    """`platform`'s price here: its list price for its settings (the default tier's when this
    process cannot read them), with the fields the deployment overrides for its name."""
    base = platform.price(readable_settings(platform))
    override = overrides.get(platform.name)
    if override is None:
        return base
    return base.model_copy(update=override.model_dump(exclude_unset=True))


def results_charge(price: Price, hits: Sequence[Hit], include_content: bool) -> float:
    """What one page's results add to its request's charge (0 for most providers)."""
    extra = price.per_result_usd * max(0, len(hits) - price.included_results)
    if include_content and price.per_content_usd:
        extra += price.per_content_usd * sum(1 for h in hits if h.content)
    return extra


def dearest_call(price: Price, results: int, include_content: bool) -> float:
    """The most one request returning up to `results` results can be charged."""
    usd = price.per_request_usd + price.per_result_usd * max(0, results - price.included_results)
    if include_content:
        usd += price.per_content_usd * results
    return usd


@dataclass(frozen=True)
class PlatformEstimate:
    """One platform's part of a plan: its requests at most, and what they cost at most."""

    name: str
    calls: int
    per_call_usd: float

    @property
    def usd(self) -> float:
        return self.calls * self.per_call_usd


def estimate(
    platform: Platform[Any],
    price: Price,
    settings: Any,
    *,
    queries: int,
    depth: int,
    include_content: bool,
    call_cap: int,
) -> PlatformEstimate:
    """The most `platform`'s run of this plan can cost, on `settings` (`readable_settings`):
    its planned requests, at most its share of the search's call cap (`call_cap`, already the
    share), each at its dearest."""
    if price.free:
        return PlatformEstimate(platform.name, 0, 0.0)
    calls, results = platform.planned_calls(queries, depth, settings)
    per_call = dearest_call(price, results, include_content)
    return PlatformEstimate(platform.name, min(calls, call_cap), per_call)


@dataclass(frozen=True)
class ChainEstimate:
    """A fallback chain's part of a plan, at its dearest plausible path: every member asked,
    each at its own dearest run. A member that fails is rarely charged, but one may answer with
    an error in a billed 2xx, answer some queries and fail others (the next member takes those),
    or be asked beside the one before it (a hedge) and answer too, or be cancelled after the
    provider took the call: every member may be charged in one search, so the plan is priced
    as if each were (rules/budget.py says so in a refusal, the receipt in `chain`)."""

    name: str
    members: tuple[PlatformEstimate, ...]

    @property
    def usd(self) -> float:
        return sum(member.usd for member in self.members)

    def share(self, member: str) -> float:
        """`member`'s part of the chain's money: its estimate's part of the chain's (an equal
        part when the chain costs nothing)."""
        own = next((m.usd for m in self.members if m.name == member), 0.0)
        if self.usd <= 0:
            return 1.0 / max(len(self.members), 1)
        return own / self.usd


def chain_estimate(name: str, members: Sequence[PlatformEstimate]) -> ChainEstimate:
    """The chain `name` (its first member's name) priced at its dearest plausible path."""
    return ChainEstimate(name, tuple(members))


def cost_budget(share_usd: float | None, per_call_usd: float) -> Budget | None:
    """A run's share of the search's money as the calls it affords, each at its dearest (so a
    run never spends past its share); None: no budget, or nothing to pay."""
    if share_usd is None or per_call_usd <= 0:
        return None
    return Budget(max(int(share_usd / per_call_usd + 1e-9), 0))


def call_share(cap: int, platforms: int) -> int:
    """A platform's share of the per-search call cap (limits.py), for the estimate."""
    return limits.share(cap, platforms)
