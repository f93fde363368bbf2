"""`Retry-After`, read: how long a server asks to be left alone (RFC 9110, section 10.2.3)."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(float((when - (now or datetime.now(UTC))).total_seconds()), 0.0)
