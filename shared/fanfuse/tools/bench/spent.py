"""Where a search's time went around its slowest platform, from its timeline (wire/timeline.py):
what `fanfuse bench latency` prints for each row, to tell the queue's dispatch, the claim, the
fan-in, the finalization and the client's poll apart from the platform's own work.
"""

from __future__ import annotations

import statistics

from fanfuse.wire.timeline import Timeline

SPENT = ("start", "dispatch", "claim", "stages", "fan_in", "finalize", "seen")


def spent_on(kept: Timeline, seen: float) -> dict[str, float]:
    """One search's time around its slowest platform, from its timeline (seconds after the
    request arrived) and when the poller saw it final (`seen`, seconds after it sent it):
    start (the request to that platform's enqueue), dispatch (enqueued to claimed), claim (to
    its stages' start: the claim and the breaker's look), stages (the platform's own work, the
    stub's delay included), fan_in (the end of its stages to its fan-in committed), finalize
    (fan-in to final), seen (final to the poller's seeing it: the poll, the status read, the
    answer's way back, and the request's way in)."""
    ended = [e for e in kept.runs if e.finished is not None]
    if not ended or kept.finalized is None:
        return {}
    slow = max(ended, key=lambda e: e.finished or 0.0)
    queued = slow.queued if slow.queued is not None else 0.0
    started = slow.started if slow.started is not None else queued
    working = slow.working if slow.working is not None else started
    worked = working + sum(slow.stages.values())
    finished = slow.finished if slow.finished is not None else worked
    return {
        "start": queued,
        "dispatch": started - queued,
        "claim": working - started,
        "stages": worked - working,
        "fan_in": finished - worked,
        "finalize": kept.finalized - finished,
        "seen": seen - kept.finalized,
    }


def median_spent(runs: list[dict[str, float]]) -> dict[str, float]:
    measured = [r for r in runs if r]
    if not measured:
        return {}
    return {k: round(statistics.median(r[k] for r in measured), 4) for k in SPENT}
