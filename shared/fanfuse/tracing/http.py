"""An outbound HTTP call as a client span's attributes: OpenTelemetry's HTTP semantic
conventions (`http.request.method`, `url.full`, `server.address`, `http.response.status_code`,
`http.request.resend_count`, `error.type`) and fanfuse's own (`fanfuse.call`: the platform or
the stage that called, `fanfuse.attempts`, `fanfuse.cost_usd`). The runner (net/runner.py)
opens the span; the URL it passes is already masked (`support.redact`), as its call record's is.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fanfuse.wire.models import CallRecord

Attributes = dict[str, str | int | float | None]


def target(call: str, url: str) -> Attributes:
    """What a client span is about before its answer: who calls, and where to."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {"fanfuse.call": call, "server.address": parts.hostname, "server.port": port}


def call(record: CallRecord, url: str) -> Attributes:
    """A finished call's record: status, attempts (the resends), cost, and what went wrong."""
    failed = record.status is not None and record.status >= 400
    return {
        "http.request.method": record.method,
        "url.full": url,
        "http.response.status_code": record.status,
        "http.request.resend_count": max(record.attempts - 1, 0) or None,
        "fanfuse.attempts": record.attempts,
        "fanfuse.cost_usd": record.cost_usd or None,
        "error.type": str(record.status) if failed else "provider_error" if record.error else None,
    }


def retry(attempt: int, exc: BaseException | None, wait_s: float) -> Attributes:
    """A retry event: which attempt failed and why (its status, the server's Retry-After),
    and how long the runner waits before the next."""
    return {
        "attempt": attempt,
        "reason": getattr(exc, "reason", None) or type(exc).__name__,
        "http.response.status_code": getattr(exc, "status", None),
        "retry_after_s": getattr(exc, "retry_after", None),
        "wait_s": round(wait_s, 3),
    }
