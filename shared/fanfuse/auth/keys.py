"""API keys: `ff_{key_id}_{secret}`, stored as the secret's SHA-256 with the owner and limits.

Why this shape:

- `key_id` (16 hex characters) names the stored record, so checking a key is one read, never a
  scan over hashes; it is not secret (`fanfuse keys list` shows it, messages may name it).
- `secret` is 256 random bits (`secrets.token_urlsafe(32)`): nothing to guess or brute-force, so
  a plain SHA-256 is enough (a slow password hash protects low-entropy secrets, and would cost
  every request tens of milliseconds for nothing here). Only the hash is stored: a leaked store
  yields no usable key.
- The hash is compared with `hmac.compare_digest`, so the time a check takes tells nothing about
  how much of the secret matched.

Pure: no store and no clock (the caller passes `now`); `fanfuse.auth.callers` and `fanfuse keys`
do the reading and writing.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime

from fanfuse.wire.models import ApiKey

API_KEY_HEADER = "X-Api-Key"
"""Where a client sends its key (the functions, `fanfuse serve`, `HttpSearchClient`)."""
LOCAL_OWNER = "local"
"""The owner of the keys `fanfuse dev` and `fanfuse serve` create and print."""
PREFIX = "ff"
KEY_ID_BYTES = 8
SECRET_BYTES = 32
KEY_ID = re.compile(r"^[0-9a-f]{16}$")
KEY = re.compile(r"^ff_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
"""`token_hex(8)` is 16 hex characters (never `_`, so the split is unambiguous);
`token_urlsafe(32)` is 43 URL-safe base64 characters (which may include `_` and `-`)."""


def digest(secret: str) -> str:
    """The stored form of a secret: its SHA-256, hex."""
    return hashlib.sha256(secret.encode()).hexdigest()


def new_key(
    owner: str,
    label: str,
    rate_per_minute: int | None,
    max_in_flight: int | None,
    now: datetime,
    *,
    daily_budget_usd: float | None = None,
) -> tuple[str, ApiKey]:
    """A fresh key: the plaintext, to show once, and the record to store (its hash only).

    `rate_per_minute` and `max_in_flight` None: the deployment's defaults apply to this key;
    `daily_budget_usd` None: its searches' cost a day is not capped (rules/budget.py).
    """
    key_id = secrets.token_hex(KEY_ID_BYTES)
    secret = secrets.token_urlsafe(SECRET_BYTES)
    record = ApiKey(
        key_id=key_id,
        secret_sha256=digest(secret),
        owner=owner,
        label=label,
        rate_per_minute=rate_per_minute,
        max_in_flight=max_in_flight,
        daily_budget_usd=daily_budget_usd,
        created_at=now,
    )
    return f"{PREFIX}_{key_id}_{secret}", record


def parse_key(text: str) -> tuple[str, str] | None:
    """`(key_id, secret)` of a well-formed key, else None (whatever was sent: never echo it)."""
    found = KEY.match(text.strip())
    return (found[1], found[2]) if found else None


def matches(record: ApiKey, secret: str) -> bool:
    """Whether `secret` is the record's, compared in constant time."""
    return hmac.compare_digest(digest(secret), record.secret_sha256)


def revoked(record: ApiKey, now: datetime) -> ApiKey:
    """The record revoked at `now`; one revoked already keeps its first `revoked_at`."""
    if record.revoked_at is not None:
        return record
    return record.model_copy(update={"revoked_at": now})
