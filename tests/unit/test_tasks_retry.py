"""The dev Cloud Tasks emulator's retry timing (devstack/tasks_retry.py): doubling backoff, capped,
and a target's Retry-After when it asks for longer, as Cloud Tasks does for 429 and 503."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from fanfuse.tools.devstack.tasks_retry import (
    MAX_BACKOFF_S,
    MIN_BACKOFF_S,
    parse_retry_after,
    retry_delay,
)

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_backoff_doubles_from_the_minimum_up_to_the_cap() -> None:
    delays = [retry_delay(n, None) for n in range(1, 12)]
    assert delays[:4] == [MIN_BACKOFF_S * f for f in (1, 2, 4, 8)]
    assert delays == sorted(delays) and delays[-1] == MAX_BACKOFF_S


@pytest.mark.parametrize(("attempts", "retry_after", "expected"), [(1, 3.0, 3.0), (9, 1.0, 10.0)])
def test_the_later_of_backoff_and_retry_after_wins(
    attempts: int, retry_after: float, expected: float
) -> None:
    assert retry_delay(attempts, retry_after) == pytest.approx(expected)


def test_retry_after_as_seconds_or_as_an_http_date() -> None:
    assert parse_retry_after("7", NOW) == 7.0
    assert parse_retry_after(format_datetime(NOW + timedelta(seconds=12), usegmt=True), NOW) == 12
    assert parse_retry_after(format_datetime(NOW - timedelta(seconds=5), usegmt=True), NOW) == 0
    assert parse_retry_after(None, NOW) is None
    assert parse_retry_after("soon", NOW) is None
