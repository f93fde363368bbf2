"""Cloud Tasks' retry timing, which gcloud-tasks-emulator lacks: backoff, and Retry-After.

The emulator puts a failed task straight back in line, so a target answering 503 is called again
at once until the task's retries run out, in a fraction of a second. Cloud Tasks instead backs off
exponentially between attempts (the queue's retry_config), and for a 429 or 503 also considers
the answer's Retry-After. fanfuse leans on that: a delivery refused because another worker's
lease is live (lifecycle.claim) says when the lease ends, and a worker killed mid-run is taken
over only once its lease lapses, so the retry must come after that, not in the next 100 ms.

The local dispatcher (tasks_dispatch.py) schedules a failed task's next attempt `retry_delay`
after it fails, and dispatches no task before its schedule_time.
"""

from __future__ import annotations

MIN_BACKOFF_S = 0.1
"""Cloud Tasks' default min_backoff (infra/queues.tf uses 1 s; dev keeps retries quick)."""
MAX_BACKOFF_S = 10.0
"""The dev cap: Cloud Tasks' default is an hour, which would outlive any local search."""


def retry_delay(attempts: int, retry_after_s: float | None) -> float:
    """Seconds before the next attempt after `attempts` failed ones: the doubled backoff, or the
    target's Retry-After when that is later (the target knows when it can answer)."""
    backoff = min(MAX_BACKOFF_S, MIN_BACKOFF_S * 2.0 ** max(0, attempts - 1))
    return max(backoff, retry_after_s or 0.0)
