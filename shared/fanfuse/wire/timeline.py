"""A search's timeline: where its time went, kept in its task document, no tracing backend needed.

Every moment is in seconds after the request arrived (`Task.created_at`), to the millisecond, so
the page can draw it as a waterfall, `fanfuse trace TASK_ID` print it, and anyone read it across
clocks without converting. Its size is bounded: a fixed set of fields per platform (its stages
are at most the four `Stage`s, whatever the number of queries or results), one entry per platform
of the search, and two moments for the search itself (rules/timeline.py writes it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Finalizer = Literal["fan_in", "aggregate", "deadline", "cancel", "start"]


class RunTimeline(BaseModel):
    """One platform run, as its fan-in recorded it (or its finalization, for a straggler)."""

    platform: str
    state: str = Field(description="how it ended (a PlatformState)")
    attempt: int = Field(default=1, description="deliveries that claimed it (a takeover: 2+)")
    queued: float | None = Field(default=None, description="its task was enqueued")
    started: float | None = Field(default=None, description="a delivery claimed it")
    working: float | None = Field(
        default=None, description="its stages began (after the claim and the breaker's look)"
    )
    first_result: float | None = Field(
        default=None, description="its provider's first answer with results came back"
    )
    stages: dict[str, float] = Field(
        default_factory=dict, description="seconds per stage, in the order they ran"
    )
    finished: float | None = Field(default=None, description="its fan-in committed")
    calls: int = Field(default=0, description="outbound calls made (provider, pages)")


class Timeline(BaseModel):
    """`Task.timeline` (see the module)."""

    runs: list[RunTimeline] = Field(default_factory=list)
    fan_in: float | None = Field(
        default=None, description="the last platform's fan-in committed: every platform ended"
    )
    finalized: float | None = Field(default=None, description="the final answer was written")
    finalized_by: Finalizer | None = Field(
        default=None,
        description="who finalized: the last worker at its fan-in, the aggregate task, the "
        "deadline task, a cancel, or the start itself (nothing could be enqueued)",
    )
