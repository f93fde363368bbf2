"""Cloud Tasks' retry timing, which gcloud-tasks-emulator lacks: backoff, and Retry-After.

The emulator puts a failed task straight back in line, so a target answering 503 is called again
at once until the task's retries run out, in a fraction of a second. Cloud Tasks instead backs off
exponentially between attempts (the queue's retry_config), and for a 429 or 503 also considers
the answer's Retry-After. fanfuse leans on that: a delivery refused because another worker's
lease is live (lifecycle.claim) says when the lease ends, and a worker killed mid-run is taken
over only once its lease lapses, so the retry must come after that, not in the next 100 ms.

`RetryTiming.install` wraps the emulator's dispatch to note each failure's Retry-After and
schedules the re-queued task: the emulator already skips a task whose schedule_time is ahead.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib import error

from fanfuse.support.retry_after import parse_retry_after

MIN_BACKOFF_S = 0.1
"""Cloud Tasks' default min_backoff (infra/queues.tf uses 1 s; dev keeps retries quick)."""
MAX_BACKOFF_S = 10.0
"""The dev cap: Cloud Tasks' default is an hour, which would outlive any local search."""


def retry_delay(attempts: int, retry_after_s: float | None) -> float:
    """Seconds before the next attempt after `attempts` failed ones: the doubled backoff, or the
    target's Retry-After when that is later (the target knows when it can answer)."""
    backoff = min(MAX_BACKOFF_S, MIN_BACKOFF_S * 2.0 ** max(0, attempts - 1))
    return max(backoff, retry_after_s or 0.0)


class RetryTiming:
    """Backoff and Retry-After for one emulator process (its queues share one dispatch path)."""

    def __init__(self) -> None:
        self._dispatched: dict[str, str | None] = {}
        """Tasks dispatched by the submit in progress -> their failure's Retry-After, if any."""
        self._lock = threading.Lock()

    def install(self, emulator_server: Any, state: Any) -> None:
        """Wrap the module's dispatch and the state's submit (both untyped third-party code)."""
        dispatch = emulator_server._make_task_request
        submit = state.submit_task

        def noting_retry_after(queue_name: str, task: Any, host: str, port: int) -> Any:
            with self._lock:
                self._dispatched[task.name] = None
            try:
                return dispatch(queue_name, task, host, port)
            except error.HTTPError as exc:
                with self._lock:
                    self._dispatched[task.name] = exc.headers.get("Retry-After")
                raise

        def submit_with_backoff(task_name: str, force_run: bool = False) -> Any:
            task = submit(task_name, force_run)
            with self._lock:
                dispatched = task.name in self._dispatched
                retry_after = self._dispatched.pop(task.name, None)
            status = task.last_attempt.response_status.code if task.last_attempt else 200
            if dispatched and 400 <= status < 600:
                now = datetime.now(UTC)
                delay = retry_delay(task.dispatch_count, parse_retry_after(retry_after, now))
                task.schedule_time = now + timedelta(seconds=delay)
            return task

        emulator_server._make_task_request = noting_retry_after
        state.submit_task = submit_with_backoff
