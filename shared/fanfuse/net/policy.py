"""Every HTTP setting's default, in one table.

Three kinds of call leave fanfuse, and each has its own defaults because each has its own peer:

| setting          | provider API calls | result page fetches | LLM compression |
|------------------|--------------------|---------------------|-----------------|
| timeout (s)      | 20                 | 10                  | 60              |
| max_concurrency  | 4 per platform     | 5 per run           | 2               |
| max_attempts     | 3                  | 2                   | 2               |
| max_retry_after  | 30                 | 30                  | 30              |
| min_interval (s) | 0                  | 0                   | 0               |
| max_body_bytes   | 5 MB               | 2 MB                | 5 MB            |

A provider answers search pages (small JSON, a quota worth a few retries); a result page is an
untrusted site, fetched once or twice and cut at 2 MB; an LLM answer is slow but small. Platform
settings (`FANFUSE_<PLATFORM>_TIMEOUT`, ...) and content settings (`FANFUSE_CONTENT_TIMEOUT`,
...) take their defaults from here, so a default is changed in one place.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CallPolicy:
    """How one kind of call is made: time, concurrency, retries, spacing, size."""

    timeout: float = 20.0
    """Seconds for one attempt, body included (a slow drip is a timeout too)."""
    max_concurrency: int = 4
    max_attempts: int = 3
    max_retry_after: float = 30.0
    """A server's `Retry-After` is honoured up to this many seconds."""
    min_interval: float = 0.0
    """Seconds between the starts of two calls under one key (a provider's rate limit)."""
    max_body_bytes: int = 5_000_000


PROVIDER = CallPolicy()
PAGE_FETCH = CallPolicy(timeout=10.0, max_concurrency=5, max_attempts=2, max_body_bytes=2_000_000)
LLM = CallPolicy(timeout=60.0, max_concurrency=2, max_attempts=2)

MAX_REDIRECTS = 5
"""Redirect hops a page fetch or a link resolution follows, each one checked by the guard."""
RESOLVE_MAX_BYTES = 512_000
"""A redirect page is read only this far: its target is in the first few kilobytes."""
USER_AGENT = "fanfuse/0.1 (multi-platform search; +https://github.com/fanfuse)"
"""What provider calls send unless a platform sets its own."""
BROWSER_USER_AGENT = "Mozilla/5.0 (compatible; fanfuse/0.1; +https://github.com/fanfuse)"
"""What page fetches send: some sites answer unknown agents with an error page."""


@dataclass(frozen=True)
class FetchPolicy:
    """How an untrusted URL is fetched (net/guard.py): the address policy, redirects, agent and
    call limits. Here, not in the guard, so a composition root that builds the content settings
    (which return one) loads no httpx: a function that only starts searches never needs it."""

    allow_private: bool = False
    allow_loopback: bool = False
    max_redirects: int = MAX_REDIRECTS
    user_agent: str = BROWSER_USER_AGENT
    call: CallPolicy = PAGE_FETCH
