"""The receipt's shapes: what a search cost per platform, and the budget it ran under.

Kept beside the documents (models.py) that carry them: the task document's `cost`, filled from
the call records' `cost_usd` (rules/spend.py), and the admission's estimate (rules/budget.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


def usd(amount: float) -> str:
    """Dollars as the price lists write them, for a message or a receipt: up to four decimals
    (prices go to a tenth of a cent), no trailing zeros (`$0.035`, `$1`, `$0`)."""
    return f"${amount:.4f}".rstrip("0").rstrip(".") if amount else "$0"


class Price(BaseModel):
    """A platform's price list in USD (platforms/pricing.py says how a call is charged): each
    platform module declares its provider's public list price, and a deployment overrides any
    field of it by platform name (`Settings.prices`, `FANFUSE_PRICES`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    per_request_usd: float = Field(
        default=0.0, ge=0, description="each request to the provider: one page of results"
    )
    per_result_usd: float = Field(
        default=0.0, ge=0, description="each result a request returns past `included_results`"
    )
    included_results: int = Field(
        default=0, ge=0, description="results a request's base price includes"
    )
    per_content_usd: float = Field(
        default=0.0,
        ge=0,
        description="each page content the provider fetches for a result, where it charges "
        "for that (only when the search asks for content)",
    )

    @property
    def free(self) -> bool:
        return not (self.per_request_usd or self.per_result_usd or self.per_content_usd)


class MemberCost(BaseModel):
    """What one member of a platform's fallback chain cost in one search."""

    calls: int = Field(default=0, ge=0, description="charged provider calls")
    usd: float = Field(default=0.0, ge=0)


class PlatformCost(BaseModel):
    """What one platform's provider calls cost in one search (a chain's: all its members')."""

    calls: int = Field(default=0, ge=0, description="charged provider calls")
    usd: float = Field(default=0.0, ge=0)
    estimate_usd: float = Field(
        default=0.0, ge=0, description="the plan's estimate for it, made before any call"
    )
    chain: list[str] = Field(
        default_factory=list,
        description="a fallback chain's members: its estimate is the chain at its dearest "
        "plausible path, every member asked and charged",
    )
    members: dict[str, MemberCost] = Field(
        default_factory=dict, description="a chain: each member's charged calls and cost"
    )


BudgetPolicy = Literal["refuse", "trim"]


class CostBudget(BaseModel):
    """The budget a search ran under: its cap (the request's, else the deployment's default
    per-request cap) and the caller's daily budget (an API key's), as they were at its start."""

    max_cost_usd: float | None = Field(
        default=None, description="the per-request cap; None: no cap"
    )
    source: Literal["request", "deployment"] | None = Field(
        default=None, description="whose cap: the request's max_cost_usd or the deployment's"
    )
    policy: BudgetPolicy = "refuse"
    daily_budget_usd: float | None = Field(
        default=None, description="the API key's daily budget; None: none"
    )
    key_id: str | None = Field(
        default=None,
        description="the API key whose daily budget this search counts against (a budget is "
        "its key's own, not its owner's: rules/budget.py)",
    )
    daily_spent_usd: float | None = Field(
        default=None, description="the key's spend today before this search (reserved included)"
    )


class Cost(BaseModel):
    """The receipt: what a search's provider calls cost (`CallRecord.cost_usd`, summed per
    platform), the estimate it was admitted on, the budget it ran under, and the platforms the
    budget dropped from its plan (`budget: "trim"`)."""

    platforms: dict[str, PlatformCost] = Field(default_factory=dict)
    total_usd: float = Field(default=0.0, ge=0)
    estimate_usd: float = Field(
        default=0.0, ge=0, description="the plan's estimated cost at admission"
    )
    budget: CostBudget = Field(default_factory=CostBudget)
    trimmed: list[str] = Field(
        default_factory=list, description="platforms dropped from the plan to fit the budget"
    )
    currency: Literal["USD"] = "USD"


class HeldCall(BaseModel):
    """A provider call counted before it was sent (rules/spend.py): on its platform document
    from just before the request leaves until its answer is settled into the run's call
    records. Until then it counts as paid at `usd`, the dearest the call can cost, so that a
    cancel, the deadline or a killed worker never leaves a call the provider may bill uncounted.
    """

    id: str
    usd: float = Field(ge=0, description="what it counts for until settled: its dearest price")
    lease: str = Field(description="the delivery that sent it (its lease token)")
    at: datetime
