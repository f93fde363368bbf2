"""`Retry-After`, read: how long a server asks to be left alone (RFC 9110, section 10.2.3).

The one parser of the header: the platforms' HTTP runner (`net.runner`, what a provider asks),
the task deliveries (`http.deliveries`, what a held lease answers, which the Lambda turns into a
message's visibility) and the dev Cloud Tasks emulator's retry timing (`tools/devstack`) all read
it here.
"""

from __future__ import annotations

import email.utils
import math
from datetime import UTC, datetime


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header: delta-seconds or an HTTP date (one in the
    past is 0); None when there is none or it is neither. Seconds are read leniently (a
    fraction is taken as sent), but never as NaN or infinity, which no wait can honour."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(seconds, 0.0) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError):  # Overflow: a year or a zone of 20 digits
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(float((when - (now or datetime.now(UTC))).total_seconds()), 0.0)
