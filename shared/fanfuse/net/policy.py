"""Every HTTP setting's default, in one table.

Three kinds of call leave fanfuse, and each has its own defaults because each has its own peer:

| setting          | provider API calls | result page fetches | LLM compression |
|------------------|--------------------|---------------------|-----------------|
| timeout (s)      | 20                 | 10                  | 60              |
| max_concurrency  | from its RateLimit | 5 per run           | 2               |
| max_attempts     | 3                  | 2                   | 2               |
| max_retry_after  | 30                 | 30                  | 30              |
| min_interval (s) | 0                  | 0                   | 0               |
| max_body_bytes   | 5 MB               | 2 MB                | 5 MB            |

A provider's calls in flight per process derive from its documented rate limit (`RateLimit`,
`concurrency_for`): enough to use the rate, no more, since more only earns 429s; 4 where the
provider documents none. A deployment sets its own with `FANFUSE_<PLATFORM>_MAX_CONCURRENCY` (a
paid plan, a private instance); `fanfuse platforms` shows what is in force and where it comes from.

A provider answers search pages (small JSON, a quota worth a few retries); a result page is an
untrusted site, fetched once or twice and cut at 2 MB; an LLM answer is slow but small. Platform
settings (`FANFUSE_<PLATFORM>_TIMEOUT`, ...) and content settings (`FANFUSE_CONTENT_TIMEOUT`,
...) take their defaults from here, so a default is changed in one place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

UNDOCUMENTED_CONCURRENCY = 4


@dataclass(frozen=True)
class CallPolicy:
    """How one kind of call is made: time, concurrency, retries, spacing, size."""

    timeout: float = 20.0
    """Seconds for one attempt, body included (a slow drip is a timeout too)."""
    max_concurrency: int = UNDOCUMENTED_CONCURRENCY
    """Calls in flight per process; a platform's default is `concurrency_for` its RateLimit."""
    max_attempts: int = 3
    max_retry_after: float = 30.0
    """A server's `Retry-After` is honoured up to this many seconds."""
    min_interval: float = 0.0
    """Seconds between the starts of two calls under one key (a provider's rate limit)."""
    max_body_bytes: int = 5_000_000


@dataclass(frozen=True)
class RateLimit:
    """A provider's documented limit on calls, from which its default concurrency derives."""

    source: str
    """Where the figure comes from and which plan it is (shown by `fanfuse platforms`)."""
    per_second: float | None = None
    """Requests a second it allows; None: it documents no rate."""
    in_flight: int | None = None
    """Calls at once it asks for (Wikipedia: one at a time), whatever the rate."""
    self_hosted: bool = False
    """The deployment runs the service itself (SearXNG, a local stub): no provider limit."""


UNDOCUMENTED = RateLimit("no documented rate limit: the conservative default")
SELF_HOSTED_CONCURRENCY = 64
"""Calls in flight to a service the deployment runs itself: a server's worth of users, each
waiting on one call, without letting one process open unbounded connections."""
MAX_DERIVED_CONCURRENCY = 64
"""A generous rate times a slow answer still gets no more connections than this."""


def concurrency_for(limit: RateLimit, latency_s: float) -> int:
    """Calls in flight per process that a rate limit allows (Little's law: rate x latency).

    A provider allowing R requests a second, each taking L seconds, is kept busy by R x L calls
    at once; more would only queue at the provider or come back 429. `in_flight` wins when the
    provider names one; self-hosted services get a server's worth; an undocumented limit gets
    the conservative 4.
    """
    if limit.in_flight is not None:
        return max(1, limit.in_flight)
    if limit.per_second is not None:
        return max(1, min(MAX_DERIVED_CONCURRENCY, math.ceil(limit.per_second * latency_s)))
    if limit.self_hosted:
        return SELF_HOSTED_CONCURRENCY
    return UNDOCUMENTED_CONCURRENCY


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
