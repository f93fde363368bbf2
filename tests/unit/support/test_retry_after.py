"""The one Retry-After parser (`fanfuse.support.retry_after`), which the HTTP runner, the task
deliveries (and so the Lambda's visibility change) and the dev Cloud Tasks emulator share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from fanfuse.support.retry_after import parse_retry_after

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("1.5", 1.5),  # not RFC delta-seconds, but what some servers send: taken as meant
        ("-3", 0.0),  # never a negative wait
        (format_datetime(NOW + timedelta(seconds=12), usegmt=True), 12.0),
        (format_datetime(NOW - timedelta(seconds=5), usegmt=True), 0.0),  # in the past: now
        ("Mon, 23 Nov 2026 12:00:30 -0000", 30.0),  # a date without a zone is UTC
        (None, None),
        ("", None),
        ("soon", None),
        ("nan", None),  # no wait can honour these
        ("inf", None),
        ("-inf", None),
    ],
)
def test_retry_after_as_seconds_or_as_an_http_date(
    value: str | None, expected: float | None
) -> None:
    assert parse_retry_after(value, NOW) == expected


def test_a_date_is_read_against_the_clock_when_no_now_is_given() -> None:
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=60), usegmt=True)
    wait = parse_retry_after(soon)
    assert wait is not None and 55 <= wait <= 60
