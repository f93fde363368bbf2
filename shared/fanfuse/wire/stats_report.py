"""The shapes of `fanfuse stats` and `GET /stats`: per platform figures over a recent window.

Aggregate figures only: counts, seconds, dollars and the breaker's state. Nothing of a search's
query, results or owner is in them, so what a caller may read is decided by whose searches
are counted (docs/security.md, "Stats"), never by hiding fields.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from fanfuse.wire.models import BreakerState

DEFAULT_WINDOW_S = 24 * 3600.0
"""A day: what an operator looks at first. Documents live `ttl_minutes` (30 min by default), so
the window reaches back at most that far in practice: `Stats.oldest` says how far it did."""
MAX_WINDOW_S = 30 * 24 * 3600.0
WINDOW_PATTERN = "^0*[1-9][0-9]{0,8}[smhd]?$"
"""A window's one spelling (http/stats_route.py), in the OpenAPI document too: a count and a
unit."""
MAX_SEARCHES = 2000
"""The most recent searches a stats request reads, at most: bounded reads for a request anyone
with a key may make (`Stats.truncated` says when the window held more)."""


class Outcomes(BaseModel):
    """How a platform's runs ended: each run counted once, by its terminal state."""

    succeeded: int = 0
    failed: int = 0
    timed_out: int = 0
    suspended: int = 0
    cancelled: int = 0
    unfinished: int = Field(default=0, description="still queued or running")


class PlatformStats(BaseModel):
    """One platform's figures over the window."""

    name: str
    runs: int = Field(description="platform runs in the window's searches")
    outcomes: Outcomes
    errors: dict[str, int] = Field(
        default_factory=dict,
        description="failed runs by kind (captcha, rate_limited, denied, error, query, "
        "not_asked, internal)",
    )
    latency_p50_s: float | None = Field(
        default=None,
        description="median of the searching stage's seconds, over runs that asked the "
        "provider and succeeded (as the platform's measured latency); None: no such run",
    )
    latency_p90_s: float | None = Field(
        default=None, description="their p90 (a fallback chain hedges after it by default)"
    )
    latency_p95_s: float | None = None
    latency_samples: int = 0
    cold_starts: int = Field(
        default=0,
        description="runs that first loaded the platform into a fresh process (a model, an "
        "index): their loading seconds are left out of the latency and counted here",
    )
    cold_start_p50_s: float | None = Field(
        default=None, description="median seconds those runs spent loading"
    )
    cache_hits: int = Field(default=0, description="queries answered from the cache")
    cache_misses: int = Field(default=0, description="queries the cache could not answer")
    cache_hit_rate: float | None = Field(
        default=None, description="hits / (hits + misses); None: the cache was not consulted"
    )
    results: int = Field(
        default=0, description="final results (after dedup) this platform contributed to"
    )
    unique_results: int = Field(
        default=0, description="of those, the ones no other platform of the search found"
    )
    provider_calls: int = Field(default=0, description="calls made to the provider")
    spend_usd: float = Field(default=0.0, description="what its provider calls cost")
    paced_calls: int = Field(
        default=0, description="calls that waited for the provider's pace across workers"
    )
    paced_s: float = Field(default=0.0, description="seconds those calls waited in all")
    breaker: BreakerState | None = Field(
        default=None, description="its circuit breaker now (None: never recorded)"
    )
    retry_at: datetime | None = Field(default=None, description="open: when a probe may go")


class Stats(BaseModel):
    """`GET /stats`: every platform seen in the window or in the health documents."""

    window_s: float
    since: datetime
    now: datetime
    scope: str = Field(description='"all" (an operator), or "owner": the caller\'s searches')
    searches: int = Field(description="searches counted (created in the window)")
    finished: int = Field(description="of those, finished (their final results counted)")
    truncated: bool = Field(
        default=False, description="the window held more searches than were read"
    )
    oldest: datetime | None = Field(
        default=None, description="the oldest search counted (documents expire: see ttl)"
    )
    spend_usd: float = 0.0
    platforms: list[PlatformStats] = Field(default_factory=list)
