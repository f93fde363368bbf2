"""The dev Cloud Tasks emulator's retry timing (devstack/tasks_retry.py): doubling backoff, capped,
and a target's Retry-After when it asks for longer, as Cloud Tasks does for 429 and 503.
The header itself is read by `support.retry_after` (tests/unit/support/test_retry_after.py)."""

from __future__ import annotations

import pytest

from fanfuse.tools.devstack.tasks_retry import MAX_BACKOFF_S, MIN_BACKOFF_S, retry_delay


def test_backoff_doubles_from_the_minimum_up_to_the_cap() -> None:
    delays = [retry_delay(n, None) for n in range(1, 12)]
    assert delays[:4] == [MIN_BACKOFF_S * f for f in (1, 2, 4, 8)]
    assert delays == sorted(delays) and delays[-1] == MAX_BACKOFF_S


@pytest.mark.parametrize(("attempts", "retry_after", "expected"), [(1, 3.0, 3.0), (9, 1.0, 10.0)])
def test_the_later_of_backoff_and_retry_after_wins(
    attempts: int, retry_after: float, expected: float
) -> None:
    assert retry_delay(attempts, retry_after) == pytest.approx(expected)
