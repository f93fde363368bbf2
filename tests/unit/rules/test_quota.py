"""quota.py's token bucket on its own, and its sharded bound as admission.take drives it."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fanfuse.rules import quota
from fanfuse.rules.quota import Limit
from fanfuse.service import admission
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.models import QuotaBucket


def put(bucket: QuotaBucket, _read: QuotaBucket | None) -> tuple[QuotaBucket, None]:
    """A quota mutator that writes `bucket` whatever it read, and admits."""
    return bucket, None


T0 = datetime(2026, 1, 1, tzinfo=UTC)
PER_MINUTE = Limit.per_minute(30)  # 0.5 a second, a burst of 30


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_new_bucket_is_full_and_a_take_leaves_one_less() -> None:
    written, wait = quota.take(None, PER_MINUTE, T0)
    assert wait is None and written is not None
    assert written.tokens == 29 and written.updated_at == T0
    assert written.expires_at == at(2)  # one token back at 0.5/s: full again in 2 s


def test_refill_is_continuous_and_stops_at_the_burst() -> None:
    empty = QuotaBucket(tokens=0, updated_at=T0, expires_at=at(60))
    assert quota.level(empty, PER_MINUTE, at(1)) == 0.5
    assert quota.level(empty, PER_MINUTE, at(10)) == 5
    assert quota.level(empty, PER_MINUTE, at(3600)) == 30
    assert quota.level(None, PER_MINUTE, T0) == 30


def test_an_empty_bucket_refuses_with_the_time_until_a_token_and_writes_nothing() -> None:
    bucket = QuotaBucket(tokens=0.25, updated_at=T0, expires_at=at(60))
    written, wait = quota.take(bucket, PER_MINUTE, T0)
    assert written is None and wait == pytest.approx(1.5)  # 0.75 of a token at 0.5/s
    written, wait = quota.take(bucket, PER_MINUTE, at(1.5))
    assert wait is None and written is not None and written.tokens == pytest.approx(0)


def test_a_bucket_stamped_in_the_future_gets_no_refill_and_never_goes_negative() -> None:
    """Another instance's clock ahead of ours: the skew delays a refill, never grants one."""
    bucket = QuotaBucket(tokens=0.5, updated_at=at(10), expires_at=at(60))
    assert quota.level(bucket, PER_MINUTE, T0) == 0.5
    written, wait = quota.take(bucket, PER_MINUTE, T0)
    assert written is None and wait == pytest.approx(1.0)


@pytest.mark.parametrize(("per_minute", "shards"), [(1, 1), (30, 1), (31, 2), (60, 2), (600, 20)])
def test_shards_keep_each_document_under_half_a_write_a_second(
    per_minute: int, shards: int
) -> None:
    limit = Limit.per_minute(per_minute)
    assert limit.shards() == shards
    shard = limit.shard(shards)
    assert shard.rate <= quota.SHARD_WRITES_PER_S + 1e-12
    assert shard.burst >= 1  # every shard can hold a whole token
    assert shard.rate * shards == pytest.approx(limit.rate)
    assert shard.burst * shards == pytest.approx(limit.burst)


def test_a_burst_too_small_to_split_gives_fewer_shards_each_holding_a_token() -> None:
    assert Limit(rate=10, burst=4).shards() == 4  # 20 would leave 0.2 of a token each


def test_shard_keys_are_distinct_bounded_and_safe_document_ids() -> None:
    rng = random.Random(7)
    keys = quota.shard_keys("alice", 20, rng)
    assert len(keys) == quota.MAX_TRIES == len(set(keys))
    assert all(k.startswith("alice#") and 0 <= int(k.split("#")[1]) < 20 for k in keys)
    assert quota.shard_keys("alice", 1, rng) == ["alice#0"]
    assert quota.bucket_key("a/b#c") == "a%2Fb%23c"  # no path separator, no second `#`
    long = quota.bucket_key("x" * 500)
    assert long.startswith("sha256-") and len(long) == 71


def test_admission_tries_at_most_max_tries_shards_and_reports_the_soonest_refill() -> None:
    store = SqliteStore(":memory:")
    limit = Limit.per_minute(600)  # 20 shards, each 0.5 a second up to 30
    n = limit.shards()
    shard = limit.shard(n)
    for i in range(n):  # every shard empty, each a different time from a token
        empty = QuotaBucket(tokens=i / (2 * n), updated_at=T0, expires_at=at(60))
        store.take_quota(f"bob#{i}", partial(put, empty))
    wait = admission.take(store, "bob", limit, T0, random.Random(3))
    tried = quota.shard_keys("bob", n, random.Random(3))
    soonest = min((1 - int(k.split("#")[1]) / (2 * n)) / shard.rate for k in tried)
    assert wait == pytest.approx(soonest)


gap = st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.3, 1.0, 5.0]) | st.floats(0, 0.5)
times = st.lists(gap, min_size=10, max_size=80)
"""Gaps between takes: mostly faster than any rate here (so buckets drain and the refill is
what admits), now and then a spell long enough to refill."""


@settings(max_examples=60, deadline=None)
@given(
    gaps=times,
    limit=st.sampled_from(
        [*(Limit.per_minute(n) for n in (6, 30, 31, 90)), Limit(rate=2, burst=8), Limit(5, 12)]
    ),
    seed=st.integers(0, 2**16),
)
def test_accepted_starts_in_any_window_stay_within_burst_plus_rate_times_t(
    gaps: list[float], limit: Limit, seed: int
) -> None:
    """Whatever the timing and whichever shards are tried: at most burst + rate * t. The small
    bursts (4 shards of 2 tokens, 10 of 1.2) drain in a few takes, so the refill is tested too."""
    store = SqliteStore(":memory:")
    rng = random.Random(seed)
    now, accepted = 0.0, []
    for gap in gaps:
        now += gap
        if admission.take(store, "carol", limit, at(now), rng) is None:
            accepted.append(now)
    for i, start in enumerate(accepted):
        for j in range(i, len(accepted)):
            window = accepted[j] - start
            assert j - i + 1 <= limit.burst + limit.rate * window + 1e-6


@settings(max_examples=40, deadline=None)
@given(gaps=times, per_minute=st.sampled_from([1, 6, 30]))
def test_one_shard_admits_exactly_when_a_token_is_there(gaps: list[float], per_minute: int) -> None:
    """Not only a bound: an unsharded bucket refuses only when it holds less than a token, and
    a retry after the Retry-After it gave is admitted."""
    limit = Limit.per_minute(per_minute)
    bucket: QuotaBucket | None = None
    now = 0.0
    for gap in gaps:
        now += gap
        before = quota.level(bucket, limit, at(now))
        written, wait = quota.take(bucket, limit, at(now))
        assert (written is not None) == (before + quota.EPSILON >= 1)
        if wait is not None:
            assert quota.take(bucket, limit, at(now + wait))[1] is None
        bucket = written or bucket
