"""What a deployment keeps about its platforms and callers besides the searches: each platform's
measured latency and circuit breaker, and the callers' quota buckets (re-exported by models).

Split from models.py, whose documents are the searches' own; these outlive any one search.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field


class BreakerState(StrEnum):
    """A platform's circuit breaker (breaker.py): closed calls, open answers `suspended`,
    half_open lets one probe call through."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class FailureKind(StrEnum):
    """Why a platform run or query failed, as far as its breaker cares: the first four are the
    provider's (each with its own cool-down), the others never count (breaker.py says why)."""

    CAPTCHA = "captcha"
    RATE_LIMITED = "rate_limited"
    DENIED = "denied"
    ERROR = "error"
    QUERY = "query"
    """The provider refused the request as asked (400, 404, 413, 422...): the caller's query."""
    NOT_ASKED = "not_asked"
    """The provider was not asked (`cache: only` found nothing, a per-search cap)."""
    INTERNAL = "internal"
    """fanfuse's own failure (a bug), or one after the searching stage (a page, the compressor)."""


class PlatformHealth(BaseModel):
    """`platform_health/{name}` (Firestore: `{collection}_health/{name}`, SQLite: the `health`
    table): what this deployment has measured of one platform, and its circuit breaker."""

    name: str
    latency_s: float | None = Field(
        default=None,
        description="moving average of the searching stage's seconds, over runs that asked "
        "the provider (cache hits and failures are not latency); None: not measured yet",
    )
    samples: int = Field(default=0, ge=0)
    cold_start_s: float | None = Field(
        default=None,
        description="seconds the last run that loaded the platform into a fresh process spent "
        "loading (a model, an index), kept out of `latency_s`; None: none measured",
    )
    recent_s: list[float] = Field(
        default_factory=list,
        description="the last sampled searching seconds, newest last (health.py): their p90 is "
        "how long a fallback chain waits for it before it hedges, by default",
    )
    updated_at: datetime
    state: BreakerState = BreakerState.CLOSED
    reason: FailureKind | None = Field(default=None, description="why it was last suspended")
    retry_at: datetime | None = Field(default=None, description="open: when a probe may go")
    consecutive_failures: int = Field(default=0, ge=0)
    probe_token: str | None = Field(default=None, description="half_open: who holds the probe")
    probe_claimed_at: datetime | None = None


class QuotaBucket(BaseModel):
    """`{collection}_quota/{key}`: one shard of a caller's start-rate token bucket (quota.py)."""

    tokens: float = Field(ge=0)
    updated_at: datetime
    expires_at: datetime = Field(
        description="when the bucket is full again: from then on no document means the same, "
        "so a TTL policy may delete it"
    )
