"""What a search cost: the receipt summed from its platforms' call records (pure).

Each provider call is priced when it is made (`CallRecord.cost_usd`, by the platform's price
list: `fanfuse.platforms.pricing`), so the receipt is a sum over the platform documents and
needs no write of its own while the search runs: the status view sums the runs so far, the
finalization writes the sum into the task document with the rest of the final answer.

A run keeps at most `net.runner.MAX_RECORDED_CALLS` (200) call records; the per-search call cap
(`FANFUSE_MAX_PROVIDER_CALLS_PER_SEARCH`, 100 by default, shared by the platforms) stays under it,
so the sum is every charged call unless a deployment raises the cap past 200 for one platform.
What a run that is still calling when the search is finalized (timed out, cancelled) spends
after that is not on the receipt: its outcome is discarded with its calls.
"""

from __future__ import annotations

from collections.abc import Iterable

from fanfuse.rules.provenance import member_spend
from fanfuse.wire.cost import Cost, MemberCost, PlatformCost
from fanfuse.wire.models import PlatformRun

USD_PLACES = 6
"""Prices are fractions of a cent (a tenth of a cent a call is common): six places keep them
exact enough to add up, and the sum free of float noise."""


def usd(amount: float) -> float:
    """An amount rounded for a document (floats summed in any order give the same figure)."""
    return round(amount, USD_PLACES)


def receipt(cost: Cost, runs: Iterable[PlatformRun]) -> Cost:
    """`cost` (the estimate and budget the search was admitted with) with each platform's
    charged calls and dollars from its call records, and the total."""
    platforms = dict(cost.platforms)
    for run in runs:
        charged = [c for c in run.calls if c.cost_usd > 0]
        before = platforms.get(run.name, PlatformCost())
        members = {
            name: MemberCost(calls=calls, usd=usd(spent))
            for name, (calls, spent) in member_spend(run).items()
        }
        platforms[run.name] = before.model_copy(
            update={
                "calls": len(charged),
                "usd": usd(sum(c.cost_usd for c in charged)),
                "members": members,
            }
        )
    total = usd(sum(p.usd for p in platforms.values()))
    return cost.model_copy(update={"platforms": platforms, "total_usd": total})
