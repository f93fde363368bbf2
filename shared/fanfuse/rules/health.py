"""Platform health: what this deployment has measured of each platform, as pure rules.

Today that is latency, which `fast` mode uses to pick the quickest platforms. A deployment's
own measurement beats any table: the same provider is quick from one region and slow from
another, and an LLM-backed search is slow everywhere. Until a platform has been measured, its
class's `typical_latency_s` stands in.

The estimate is an exponentially weighted moving average of the searching stage's seconds
(content fetching is a separate choice, and `fast` does not fetch), less the cold start a run
reports (COLD_START): `vectors`' first search in a process spends seconds loading its model, and
counting that would rank it among the slowest platforms while it answers in milliseconds. It
is written at most once per MIN_WRITE_INTERVAL_S per platform: the store's health document
then sees a write every half-minute at most, far below Firestore's one sustained write per
second per document, and a busy deployment still refreshes its estimate twice a minute.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime

from fanfuse.wire.models import PlatformHealth

COLD_START = "cold_start"
"""A run's timing key for the seconds its searching stage spent loading what a fresh process
loads once (a model, an index from disk): not latency, which a warm process would not pay."""

LATENCY_PLACES = 4
"""Seconds are kept to a tenth of a millisecond: finer is noise."""

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


def warm_seconds(timings: Mapping[str, float], stage: str) -> float | None:
    """The stage's seconds less the run's cold start (never below 0); None: no such stage."""
    seconds = timings.get(stage)
    if seconds is None:
        return None
    return round(max(seconds - timings.get(COLD_START, 0.0), 0.0), 4)


def observed(
    previous: PlatformHealth | None,
    name: str,
    seconds: float,
    now: datetime,
    cold_start_s: float | None = None,
) -> PlatformHealth | None:
    """The health to write after a run took `seconds` (warm), or None when it is too soon to
    write. A cold start is written whenever there is one (once per process and platform, far
    below any write limit), the latency sample only when due. The breaker's fields (breaker.py)
    are kept as they are: a latency sample is not a verdict."""
    cold = {"cold_start_s": cold_start_s} if cold_start_s is not None else {}
    if not due(previous, now):
        return previous.model_copy(update=cold) if cold and previous is not None else None
    recent = [*(previous.recent_s if previous is not None else []), round(seconds, 4)][-RECENT:]
    if previous is None or previous.latency_s is None:
        base = previous or PlatformHealth(name=name, updated_at=now)
        return base.model_copy(
            update={
                "latency_s": seconds,
                "samples": 1,
                "recent_s": recent,
                "updated_at": now,
                **cold,
            }
        )
    return previous.model_copy(
        update={
            "latency_s": ALPHA * seconds + (1 - ALPHA) * previous.latency_s,
            "samples": previous.samples + 1,
            "recent_s": recent,
            "updated_at": now,
            **cold,
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


def percentile(samples: Sequence[float], q: float) -> float | None:
    """The `q` quantile (0..1) by linear interpolation between closest ranks (numpy's default,
    `statistics.quantiles(method="inclusive")`): p50 of [1, 2, 3, 4] is 2.5. None: no sample."""
    if not samples:
        return None
    ordered = sorted(samples)
    at = q * (len(ordered) - 1)
    low, high = math.floor(at), math.ceil(at)
    value = ordered[low] + (ordered[high] - ordered[low]) * (at - low)
    return round(value, LATENCY_PLACES)
