"""A platform's circuit breaker, shared through the store: pure transitions, no I/O.

Why: a platform that answers with a CAPTCHA, 429s or errors would otherwise be called on every
search, spending each search's deadline and the provider's patience. SearXNG suspends such an
engine for a while (its `suspended_time`); fanfuse does the same, with the issue's figures, and
keeps the state in the store (`platform_health/{name}`) so every instance sees it:

- a CAPTCHA or anti-bot page (`errors.Blocked`) suspends for CAPTCHA_S (1 h): a solved-nothing
  retry only makes the block longer;
- a 429 after the runner's retries, or an access-denied answer (401/403), for RATE_LIMITED_S
  (3 min): quotas and bans of that kind are minutes long;
- any other failure of the provider's (5xx, timeouts, connection failures, a malformed answer)
  counts; FAILURES_TO_OPEN in a row suspend for 5 s, doubling with each further failure up to
  2 min. Three, because the runner already retried each call and a platform's queries fail one
  by one: one or two failed runs in a row are noise (a deadline shorter than the provider), a
  third is a pattern.

Only the provider's failures count (`counts_against_provider`): the breaker is shared by every
tenant, so a failure a caller can cause at will (a query the provider refuses with a 4xx, a
hostile result page, an option the provider rejects) must not suspend the platform for the
others. A query the provider refused proves it answers, so it ends a probe as a success would.

When the suspension ends, ONE run claims the probe (half_open, in a store transaction, so two
instances cannot both probe); its success closes the breaker, its failure reopens it with the
next, longer, suspension. A probe that never reports (its worker died) frees the probe after
PROBE_LEASE_S. Every function returns the document to write, or None when nothing changed:
health is written only when its state does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from fanfuse.wire.models import BreakerState, FailureKind, PlatformHealth

CAPTCHA_S = 3600.0
RATE_LIMITED_S = 180.0
FAILURES_TO_OPEN = 3
BACKOFF_MIN_S = 5.0
BACKOFF_MAX_S = 120.0
PROBE_LEASE_S = 300.0
"""A probe's claim holds this long: longer than any platform run's time budget."""

SUSPENSION_S = {FailureKind.CAPTCHA: CAPTCHA_S, FailureKind.RATE_LIMITED: RATE_LIMITED_S}
SUSPENSION_S[FailureKind.DENIED] = RATE_LIMITED_S


class Verdict(StrEnum):
    CALL = "call"
    PROBE = "probe"
    SUSPENDED = "suspended"


PROVIDER_FAULTS = frozenset(
    {FailureKind.CAPTCHA, FailureKind.RATE_LIMITED, FailureKind.DENIED, FailureKind.ERROR}
)
SEVERITY = (FailureKind.CAPTCHA, FailureKind.RATE_LIMITED, FailureKind.DENIED, FailureKind.ERROR)
"""The provider's kinds, longest cool-down first: a run whose queries failed differently is
taken at its most serious provider failure."""


def counts_against_provider(kind: FailureKind) -> bool:
    """Whether a failure of this kind counts in the platform's breaker.

    Yes for what the provider did: a CAPTCHA or anti-bot page, a 429, access denied (a 401/403
    for the deployment's own credentials: no caller can fix that, and calling on only spends
    the ban), and errors (5xx, timeouts, connection failures, a malformed answer). No for
    QUERY (a 4xx answering the caller's query: the provider is up, the question was refused;
    counting it would let three crafted queries suspend the platform for every tenant, renewable
    at the start rate), NOT_ASKED (the provider was never called) and INTERNAL (fanfuse's bug,
    or a failure after the searching stage: a page's content, the compressor: not the provider).
    """
    return kind in PROVIDER_FAULTS


def run_kind(kinds: list[FailureKind]) -> FailureKind:
    """The kind of a run all of whose queries failed: its most serious provider failure if one
    query met one (a 5xx among refused queries is still the provider's), else the first kind."""
    for kind in SEVERITY:
        if kind in kinds:
            return kind
    return kinds[0] if kinds else FailureKind.ERROR


@dataclass(frozen=True)
class Gate:
    """What a run may do now; `reason` and `retry_at` say why and until when when suspended.
    `probe_token`: the claim this run holds when it is the probe (see `release_probe`)."""

    verdict: Verdict
    reason: FailureKind | None = None
    retry_at: datetime | None = None
    probe_token: str | None = None


def backoff_s(failures: int) -> float:
    """The suspension after `failures` in a row (>= FAILURES_TO_OPEN): 5 s, 10 s, ... 2 min."""
    doublings = max(failures - FAILURES_TO_OPEN, 0)
    return min(BACKOFF_MIN_S * 2.0**doublings, BACKOFF_MAX_S)


def may_call(health: PlatformHealth | None, now: datetime) -> Gate:
    """closed: call; open before retry_at, or half_open with a live probe: suspended;
    open after retry_at, or half_open whose probe lapsed: probe (the caller must claim it)."""
    if health is None or health.state is BreakerState.CLOSED:
        return Gate(Verdict.CALL)
    if health.state is BreakerState.OPEN:
        if health.retry_at is not None and now < health.retry_at:
            return Gate(Verdict.SUSPENDED, health.reason, health.retry_at)
        return Gate(Verdict.PROBE, health.reason)
    claimed = health.probe_claimed_at
    if claimed is not None and now < claimed + timedelta(seconds=PROBE_LEASE_S):
        return Gate(Verdict.SUSPENDED, health.reason, claimed + timedelta(seconds=PROBE_LEASE_S))
    return Gate(Verdict.PROBE, health.reason)


def claim_probe(health: PlatformHealth | None, token: str, now: datetime) -> PlatformHealth | None:
    """half_open with `token` as the prober, when `may_call` says probe; else None (no write)."""
    if health is None or may_call(health, now).verdict is not Verdict.PROBE:
        return None
    return health.model_copy(
        update={
            "state": BreakerState.HALF_OPEN,
            "probe_token": token,
            "probe_claimed_at": now,
            "updated_at": now,
        }
    )


def on_success(health: PlatformHealth | None, now: datetime) -> PlatformHealth | None:
    """Closed with no failures counted; None when it already was (the common case: no write)."""
    if health is None or (health.state is BreakerState.CLOSED and health.consecutive_failures == 0):
        return None
    return health.model_copy(
        update={
            "state": BreakerState.CLOSED,
            "reason": None,
            "retry_at": None,
            "consecutive_failures": 0,
            "probe_token": None,
            "probe_claimed_at": None,
            "updated_at": now,
        }
    )


def on_failure(
    health: PlatformHealth | None, name: str, kind: FailureKind, now: datetime
) -> PlatformHealth | None:
    """One more failure in a row: open for its kind's cool-down, or for the backoff once
    FAILURES_TO_OPEN errors ran together; closed with the count otherwise. None when the
    breaker is already open and not yet due (a run that began before another opened it)."""
    health = health or PlatformHealth(name=name, updated_at=now)
    if health.state is BreakerState.OPEN and health.retry_at is not None and now < health.retry_at:
        return None
    failures = health.consecutive_failures + 1
    if kind in SUSPENSION_S:
        seconds: float | None = SUSPENSION_S[kind]
    elif failures >= FAILURES_TO_OPEN:
        seconds = backoff_s(failures)
    else:
        seconds = None
    return health.model_copy(
        update={
            "state": BreakerState.CLOSED if seconds is None else BreakerState.OPEN,
            "reason": kind,
            "retry_at": None if seconds is None else now + timedelta(seconds=seconds),
            "consecutive_failures": failures,
            "probe_token": None,
            "probe_claimed_at": None,
            "updated_at": now,
        }
    )


def release_probe(
    health: PlatformHealth | None, token: str, now: datetime
) -> PlatformHealth | None:
    """Give back the probe `token` holds when its run said nothing of the provider (the caller's
    `cache: only`, a cancel, the deadline, a failure after searching): open again with the same,
    already passed, retry_at, so the next run probes at once instead of every run being
    suspended until PROBE_LEASE_S frees a claim nobody uses. None: not this token's probe."""
    if health is None or health.state is not BreakerState.HALF_OPEN or health.probe_token != token:
        return None
    return health.model_copy(
        update={
            "state": BreakerState.OPEN,
            "probe_token": None,
            "probe_claimed_at": None,
            "updated_at": now,
        }
    )
