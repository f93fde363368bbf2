"""Who calls, as the wire carries it: a verified caller and a stored API key.

These are the auth layer's vocabulary, not a search's documents (`models.py`): a `Caller` is made
for each request by `fanfuse.auth` from a credential it verified, an `ApiKey` is what the key store
keeps of a key (never the key). They depend on nothing else of the wire formats; `models.py`
re-exports both for the modules that read them beside a search's documents (a task's owner).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class Caller(BaseModel):
    """Who is calling a public endpoint, as verified by `fanfuse.auth` (never as claimed).

    `subject` becomes the owner of the searches it starts, namespaced by the credential's kind
    (`key:`, `firebase:`, `google:`, `gateway:`, `aws:`, `local:`; auth.callers). The limits are the
    caller's own (an API key's), or None for the deployment's defaults (`Settings.rate_per_minute`,
    `Settings.max_in_flight`).
    """

    subject: str = Field(min_length=1)
    via: Literal["api_key", "id_token", "gateway", "iam", "local"]
    """`local`: the fixed owner of an MCP server nobody authenticates to (stdio, loopback), an
    in-process caller the service does not admit (admission.py)."""
    key_id: str | None = None
    rate_per_minute: int | None = Field(default=None, ge=1)
    max_in_flight: int | None = Field(default=None, ge=1)
    daily_budget_usd: float | None = Field(
        default=None, ge=0, description="the key's spend a UTC day at most (rules/budget.py)"
    )


class ApiKey(BaseModel):
    """`{collection}_keys/{key_id}`: an API key as stored: its hash, never the key itself.

    A key reads `ff_{key_id}_{secret}`; `key_id` finds the record in one read, and the secret's
    SHA-256 is compared in constant time (a 256-bit random secret needs no slow hash).
    """

    key_id: str
    secret_sha256: str
    owner: str = Field(min_length=1)
    label: str = ""
    rate_per_minute: int | None = Field(default=None, ge=1)
    max_in_flight: int | None = Field(default=None, ge=1)
    daily_budget_usd: float | None = Field(
        default=None, ge=0, description="USD of provider calls a UTC day at most; None: no cap"
    )
    created_at: datetime
    revoked_at: datetime | None = None
