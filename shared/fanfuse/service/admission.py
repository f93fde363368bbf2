"""Whether a verified caller may start a search now: its cap on searches in flight, then its
start rate (quota.py). Both are read from the store, so they hold across function instances.

Admission comes before the body is read: a front verifies the caller, takes a `Ticket`
(`SearchService.admit`), and only then reads, parses and validates the body, so that an invalid
body spends the caller's token as a valid one does. Refusing a body costs the server work (up
to 64 KiB to decode and check); were invalid bodies free, that work would have no limit. A start
with a ticket takes no second token (`SearchService.start`): one token per start attempt.

The in-flight count comes first (a read), then the rate take (a write when it admits): a start
refused for the cap spends no token, and a refused start writes nothing at all. The limits are
the caller's own (an API key's) or the deployment's (`Settings.rate_per_minute`,
`Settings.max_in_flight`); in-process callers (the embedded runtime, the Python API) are not
limited, and the service does not call this for them.

The in-flight cap is a count, not a counter: the caller's searches that are not terminal and not
past their deadline (a search past it is being finalized and asks no provider any more). The
count and the task's creation are not one transaction, so two starts racing can both count
cap - 1 and both go ahead: the cap is overshot by the starts that run concurrently within one
start's latency, each of which still spends a rate token, so never by more than the rate limit
lets through. An exact cap would need a per-caller counter, incremented at start and decremented
at every end (finalize, cancel, deadline): a write on each, on one document per caller, and a
count that drifts for good when one decrement is lost. A count heals itself as searches end.
"""

from __future__ import annotations

import math
import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from fanfuse.rules import quota
from fanfuse.settings import Settings
from fanfuse.store.ports import QuotaStore
from fanfuse.support import logs
from fanfuse.wire.errors import RateLimited
from fanfuse.wire.models import Caller

IN_FLIGHT_RETRY_S = 5.0
"""Retry-After at the in-flight cap. A count does not say which search ends first (its nearest
deadline would cost reading the documents themselves); most searches end within seconds, and
every one at its deadline, so a client is told to come back in a few seconds."""

_RNG = random.Random()


@dataclass(frozen=True)
class Ticket:
    """A start let in: by whom (None: in process, not limited) and when it arrived, which is
    when the search's deadline starts to run. Taking it spent the caller's token (`admit`)."""

    caller: Caller | None
    at: datetime
    task_id: str = field(default_factory=lambda: logs.current_task()[0] or uuid.uuid4().hex)
    """The id the search will have: the one its front opened the request's log context with
    (so that what is traced and logged from the caller's check on names it), else a new one; a
    start refused later leaves it unused."""


def admit(
    store: QuotaStore,
    caller: Caller,
    settings: Settings,
    now: datetime,
    rng: random.Random = _RNG,
) -> None:
    """Return when `caller` may start a search at `now`; raise RateLimited (429) when not."""
    cap = caller.max_in_flight or settings.max_in_flight
    running = store.count_in_flight(caller.subject, now)
    if running >= cap:
        raise RateLimited(
            f"{running} searches in flight, at most {cap} at once: "
            "retry when one of them has finished",
            IN_FLIGHT_RETRY_S,
        )
    per_minute = caller.rate_per_minute or settings.rate_per_minute
    wait = take(store, caller.subject, quota.Limit.per_minute(per_minute), now, rng)
    if wait is not None:
        raise RateLimited(
            f"over the limit of {per_minute} searches a minute: retry in {math.ceil(wait)} s",
            wait,
        )


def take(
    store: QuotaStore, subject: str, limit: quota.Limit, now: datetime, rng: random.Random = _RNG
) -> float | None:
    """One start against `subject`'s sharded bucket: None when a shard admitted it, else the
    soonest refill among the shards tried (each try one read-modify-write of one document)."""
    n = limit.shards()
    shard = limit.shard(n)
    waits: list[float] = []
    for key in quota.shard_keys(subject, n, rng):
        wait = store.take_quota(key, quota.taker(shard, now))
        if wait is None:
            return None
        waits.append(wait)
    return min(waits)
