"""Provider pacing: a provider's documented rate, held across the deployment's workers.

Why: each worker already spaces and limits its own calls (net/runner.py: `max_concurrency`,
`min_interval`), but a deployment runs many workers (function instances, Lambda invocations,
a `serve` and the CLI on one database), and the provider counts them all: without a shared
count, N workers each within the rate are N times over it, and the provider answers 429, which
costs retries, a search's time and, after the retries, a suspension (breaker.py). So each
provider call first takes a token from the provider's bucket in the store: the very bucket the
callers' start rate uses (rules/quota.py, `QuotaStore.take_quota`: one atomic read-modify-write
of one document, sharded so that no document is written more than about once a second),
refilled at the provider's rate (`Platform.pace_per_second`: the settings', else the documented
`rate_limit`), holding one second's worth. A call that finds no token waits until one is due
(the wait is on its call record, `paced_s`, and in the stats) and tries again, so calls queue
here, in order of arrival give or take, instead of at the provider.

Pacing is advice about the provider, like its health: a store that cannot be reached lets the
call go (logged), and a run's deadline bounds every wait (the executor's timeout).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from fanfuse.platforms.contract import Pace, Platform
from fanfuse.platforms.pricing import readable_settings
from fanfuse.rules import quota
from fanfuse.service import admission
from fanfuse.store.ports import QuotaStore

log = logging.getLogger(__name__)

MAX_WAITS = 1000
"""Tries of one call at most (each after the wait the bucket named): a bound the deadline makes
unreachable in practice (a search's deadline over a second's refill)."""
MIN_WAIT_S = 0.005
"""A wait shorter than this is rounded up: the store is read again at most 200 times a second."""

SleepFn = Callable[[float], Awaitable[None]]


def pace_subject(platform: str) -> str:
    """The bucket's subject: `$` cannot start a caller's subject (its kind does: `key:...`),
    so a provider's bucket never shares a document with a caller's."""
    return f"$pace:{platform}"


def pace_limit(per_second: float) -> quota.Limit:
    """`per_second` calls a second, up to one second's worth at once (at least one call)."""
    return quota.Limit(rate=per_second, burst=max(1.0, per_second))


class Pacer:
    def __init__(
        self,
        store: QuotaStore,
        clock: Callable[[], datetime],
        *,
        sleep: SleepFn = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.store, self.clock, self.sleep = store, clock, sleep
        self.rng = rng or random.Random()

    def for_platform(self, name: str, platform: Platform[Any]) -> Pace | None:
        """The wait before each of `platform`'s provider calls; None: not paced."""
        per_second = platform.pace_per_second(readable_settings(platform))
        if per_second is None:
            return None
        limit = pace_limit(per_second)
        subject = pace_subject(name)

        async def pace() -> float:
            return await self.wait(subject, limit)

        return pace

    async def wait(self, subject: str, limit: quota.Limit) -> float:
        """Take a token from `subject`'s bucket, waiting until there is one; the seconds waited."""
        waited = 0.0
        for _ in range(MAX_WAITS):
            try:
                wait = admission.take(self.store, subject, limit, self.clock(), self.rng)
            except Exception:
                log.warning("could not read %s's pace; calling it", subject, exc_info=True)
                return waited
            if wait is None:
                return round(waited, 4)
            wait = max(wait, MIN_WAIT_S)
            await self.sleep(wait)
            waited += wait
        return round(waited, 4)
