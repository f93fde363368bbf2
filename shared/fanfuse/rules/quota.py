"""The per-caller start rate: a token bucket, sharded so that no document is written too often.

The rule
--------
A caller (a verified subject) may start `per_minute` searches a minute. Its bucket holds up to
`burst` tokens (by default one minute's worth, `per_minute`: a caller who has been quiet may spend
its minute at once, as "30 a minute" reads) and refills continuously at per_minute / 60 tokens a
second; a start takes one whole token or is refused with the time until one is there, which
becomes Retry-After. Over any window of t seconds a caller gets at most burst + rate * t starts:
the rate in the long run, and at worst twice it in one minute (a full bucket, then its refill).

How it stays within 1 write/s/doc
---------------------------------
Firestore sustains about one write a second per document. A bucket is written only when it admits
a start (a refusal writes nothing), so its sustained write rate is its refill rate. A caller's
bucket is therefore split into N shards, `{subject}#{i}`, each refilling at rate / N up to
burst / N, with N = ceil(rate / SHARD_WRITES_PER_S): no shard sustains more than half a write a
second (the default 30 a minute is one shard, 600 a minute twenty). A start tries the shards in a
random order, at most MAX_TRIES of them, each try ONE atomic read-modify-write of ONE document
(`QuotaStore.take_quota`), and the first shard holding a whole token admits it; Retry-After is the
soonest refill among the shards tried. A shard's writes over any t seconds are its admissions, at
most burst / N + rate / N * t: a quiet shard may take its burst in a moment (30 writes for the
default), a short burst that Firestore absorbs, never a sustained rate over half a write a second.

Each shard keeps its own bound (burst / N + rate / N * t), and the bounds add up to the caller's,
so whichever shards a start tries, the caller never gets more than burst + rate * t. The sharded
bucket errs the other way only: a start that tried MAX_TRIES empty shards is refused while an
untried one may hold a token, and tokens split across shards (0.6 + 0.6) admit nothing.

Clocks
------
Function instances' clocks differ a little. A bucket written by an instance ahead of this one
looks written in the future: elapsed time is floored at zero, so skew can delay a refill by the
skew, never grant one early.

Everything here is pure: `taker` returns the mutator a store runs inside its transaction (the
pattern of `lifecycle.py`); `fanfuse.service.admission` drives the tries against the store.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import quote

from fanfuse.rules.mutations import QuotaMutator
from fanfuse.wire.models import QuotaBucket

SHARD_WRITES_PER_S = 0.5
"""The most a shard is refilled (so written) a second: half Firestore's sustained limit."""
MAX_TRIES = 3
"""Shards one start tries: a refused start costs at most this many reads."""
KEY_CHARS = 200
"""A quoted subject longer than this is replaced by its hash (Firestore ids stop at 1,500 bytes)."""
EPSILON = 1e-9
"""A token due now is not refused over a floating-point remainder."""


@dataclass(frozen=True)
class Limit:
    """`rate` tokens a second, at most `burst` in the bucket."""

    rate: float
    burst: float

    @classmethod
    def per_minute(cls, starts: int, burst: float | None = None) -> Limit:
        """`starts` a minute; the burst defaults to one minute's worth."""
        return cls(rate=starts / 60, burst=float(starts) if burst is None else burst)

    def shards(self) -> int:
        """N = ceil(rate / SHARD_WRITES_PER_S), but never so many that a shard cannot hold
        one whole token (burst / N >= 1). Only a burst under 2 s of the rate meets that floor
        (its shards are then written more often); the default, a minute's worth, is 30 times
        more."""
        wanted = math.ceil(self.rate / SHARD_WRITES_PER_S - EPSILON)
        return max(1, min(wanted, math.floor(self.burst)))

    def shard(self, n: int) -> Limit:
        return Limit(rate=self.rate / n, burst=self.burst / n)


def level(bucket: QuotaBucket | None, limit: Limit, now: datetime) -> float:
    """The tokens in the bucket at `now`: full when there is no bucket (never used, or expired),
    else what was left plus the refill since, up to the burst (no refill for a future stamp)."""
    if bucket is None:
        return limit.burst
    elapsed = max(0.0, (now - bucket.updated_at).total_seconds())
    return min(limit.burst, bucket.tokens + elapsed * limit.rate)


def take(
    bucket: QuotaBucket | None, limit: Limit, now: datetime
) -> tuple[QuotaBucket | None, float | None]:
    """One start against one bucket: `(the bucket to write, None)` when it held a whole token,
    else `(None, seconds until it will)`: a refusal writes nothing, so refused callers cost no
    writes, and a bucket's writes are bounded by its refill."""
    tokens = level(bucket, limit, now)
    if tokens + EPSILON >= 1:
        left = max(0.0, tokens - 1)
        full_in = (limit.burst - left) / limit.rate
        written = QuotaBucket(
            tokens=left, updated_at=now, expires_at=now + timedelta(seconds=full_in)
        )
        return written, None
    return None, (1 - tokens) / limit.rate


def taker(limit: Limit, now: datetime) -> QuotaMutator:
    """`take` as the mutator a store runs in its transaction (pure: it may run more than once)."""

    def mutate(bucket: QuotaBucket | None) -> tuple[QuotaBucket | None, float | None]:
        return take(bucket, limit, now)

    return mutate


def bucket_key(subject: str) -> str:
    """The subject as a document id: quoted (no `/`, which Firestore reads as a path, and no `#`,
    which separates the shard), or hashed when long."""
    quoted = quote(subject, safe="@.-_~+")
    if len(quoted) > KEY_CHARS:
        return "sha256-" + hashlib.sha256(subject.encode()).hexdigest()
    return quoted


def shard_keys(subject: str, n: int, rng: random.Random) -> list[str]:
    """The shards one start tries, in order: MAX_TRIES (or all N, if fewer) distinct ones at
    random, so concurrent starts of one caller spread over its shards."""
    key = bucket_key(subject)
    return [f"{key}#{i}" for i in rng.sample(range(n), min(n, MAX_TRIES))]
