"""Platform health: what this deployment has measured of each platform, as pure rules.

Today that is latency, which `fast` mode uses to pick the quickest platforms. A deployment's
own measurement beats any table: the same provider is quick from one region and slow from
another, and an LLM-backed search is slow everywhere. Until a platform has been measured, its
class's `typical_latency_s` stands in.

The estimate is an exponentially weighted moving average of the searching stage's seconds
(content fetching is a separate choice, and `fast` does not fetch). It is written at most once
per MIN_WRITE_INTERVAL_S per platform: the store's health document then sees a write every
half-minute at most, far below Firestore's one sustained write per second per document, and a
busy deployment still refreshes its estimate twice a minute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from fanfuse.rules.stats import percentile
from fanfuse.wire.models import PlatformHealth

ALPHA = 0.3
"""Weight of the newest sample: about the last five samples matter, so a provider that became
slow is noticed within a few minutes of traffic, and one slow answer does not flip the order."""
MIN_WRITE_INTERVAL_S = 30.0
RECENT = 20
"""Samples kept for the p90 a fallback chain's hedge waits by default (`p90`): about the last
ten minutes of a busy platform's traffic, at one sample per MIN_WRITE_INTERVAL_S and process."""
MIN_P90_SAMPLES = 5
"""Fewer samples than this say too little of a tail: no default hedge until there are enough."""


def due(previous: PlatformHealth | None, now: datetime) -> bool:
    """Whether a new sample may be written over `previous` (none yet, or old enough)."""
    return (
        previous is None
        or previous.latency_s is None
        or (now - previous.updated_at).total_seconds() >= MIN_WRITE_INTERVAL_S
    )


def observed(
    previous: PlatformHealth | None, name: str, seconds: float, now: datetime
) -> PlatformHealth | None:
    """The health to write after a run took `seconds`, or None when it is too soon to write.
    The breaker's fields (breaker.py) are kept as they are: a latency sample is not a verdict."""
    if not due(previous, now):
        return None
    recent = [*(previous.recent_s if previous is not None else []), round(seconds, 4)][-RECENT:]
    if previous is None or previous.latency_s is None:
        base = previous or PlatformHealth(name=name, updated_at=now)
        return base.model_copy(
            update={"latency_s": seconds, "samples": 1, "recent_s": recent, "updated_at": now}
        )
    return previous.model_copy(
        update={
            "latency_s": ALPHA * seconds + (1 - ALPHA) * previous.latency_s,
            "samples": previous.samples + 1,
            "recent_s": recent,
            "updated_at": now,
        }
    )


def by_latency(
    names: Sequence[str], healths: Mapping[str, PlatformHealth], priors: Mapping[str, float]
) -> list[str]:
    """`names` quickest first: measured latency, else the prior; ties keep `names`' order."""

    def latency(name: str) -> float:
        measured = healths.get(name)
        if measured is not None and measured.latency_s is not None:
            return measured.latency_s
        return priors.get(name, float("inf"))

    return sorted(names, key=latency)  # sorted is stable: equal latencies keep their order


def p90(health: PlatformHealth | None) -> float | None:
    """The p90 of the platform's recent samples (the stats' percentile); None with fewer than
    MIN_P90_SAMPLES."""
    samples = health.recent_s if health is not None else []
    if len(samples) < MIN_P90_SAMPLES:
        return None
    return percentile(samples, 0.9)
