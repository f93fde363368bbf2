"""A fallback chain's members as the platform run document keeps them (`PlatformRun.members`).

A run whose selection entry is a chain (`google|brave`, selection.py) asks its members in turn;
each one asked, or passed over, leaves a `MemberRun` saying what it was asked, how it ended and,
unless it answered, why not. `rules/chain.py` decides the turns, `service/chains.py` runs them.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from fanfuse.wire.health import FailureKind

HedgeAfter = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)] | Literal["p90", "off"]
"""When a chain asks its next member while the one before has not answered: after that many
seconds, after the member's recent p90 latency (`p90`: its last samples in the platform's health,
no hedge until there are enough), or never (`off`: the next member is asked only on a failure)."""


class MemberRole(StrEnum):
    """Why a member was asked."""

    PRIMARY = "primary"
    """The chain's first member."""
    FALLBACK = "fallback"
    """The member before it could not answer."""
    HEDGE = "hedge"
    """The member before it had not answered after `hedge_after_s`: both were asked."""


class MemberState(StrEnum):
    ANSWERED = "answered"
    """Its answer is the run's (for the queries in `answered`)."""
    FAILED = "failed"
    CANCELLED = "cancelled"
    """Another member answered first: its calls were cancelled where the transport allows (the
    calls it made are on the run's `calls` and the receipt all the same)."""
    SKIPPED = "skipped"
    """Not asked: it cannot run here (settings), or its breaker was open when its turn came."""


class MemberRun(BaseModel):
    """One member's turn in a chain."""

    name: str
    role: MemberRole
    state: MemberState
    reason: str | None = Field(
        default=None, description="why it did not answer (None: it answered)"
    )
    failure: FailureKind | None = Field(
        default=None, description="a failed member: whose failure, as its breaker took it"
    )
    queries: list[int] = Field(
        default_factory=list, description="the indices of the queries it was asked"
    )
    answered: list[int] = Field(
        default_factory=list, description="the indices of the queries its answer is used for"
    )
    results: int = Field(default=0, description="results its answer brought to the run")
    calls: int = Field(default=0, description="provider calls it made (cancelled ones included)")
    cost_usd: float = Field(default=0.0, ge=0, description="what its calls cost")
    started_at: datetime | None = None
    seconds: float = Field(default=0.0, description="from its start to its end")
