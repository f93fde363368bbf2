"""The platform breaker (breaker.py) as a platform run uses it: the store's side of it.

Before a run, `admit` reads `platform_health/{name}` and, when the suspension has ended, claims
the single probe in the same atomic read-modify-write; after it, `record` folds the outcome in.
Both write only when the breaker's state changes. Health is advice about the provider, never the
run's failure: a store error here is logged and the run goes on as if the breaker were closed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime

from fanfuse.rules import breaker
from fanfuse.rules.health import COLD_START, due, observed, warm_seconds
from fanfuse.rules.lifecycle import Outcome
from fanfuse.rules.mutations import HealthChange
from fanfuse.service import events
from fanfuse.store.ports import HealthStore
from fanfuse.wire.models import (
    BreakerState,
    CacheState,
    FailureKind,
    PlatformHealth,
    PlatformState,
    Stage,
)

log = logging.getLogger(__name__)

CALL = breaker.Gate(breaker.Verdict.CALL)


class Circuit:
    def __init__(self, store: HealthStore, clock: Callable[[], datetime]) -> None:
        self.store, self.clock = store, clock
        self._health: dict[str, PlatformHealth | None] = {}
        """The health this process last read or wrote, per platform (see `observe_latency`)."""

    def admit(self, name: str) -> breaker.Gate:
        """call, probe (this run holds the probe) or suspended (this run must not call)."""
        token = uuid.uuid4().hex
        now = self.clock()

        def change(health: PlatformHealth | None) -> PlatformHealth | None:
            return breaker.claim_probe(health, token, now)

        noted = Logged(name, change)
        try:
            stored = self.store.update_health(name, noted)
        except Exception:
            log.warning("could not read %s's breaker; calling it", name, exc_info=True)
            return CALL
        noted.log_transition()
        if stored is not None and stored.probe_token == token:
            return breaker.Gate(breaker.Verdict.PROBE, stored.reason, probe_token=token)
        return breaker.may_call(stored, now)

    def record(self, name: str, outcome: Outcome, gate: breaker.Gate = CALL) -> None:
        """A success closes, a provider failure counts (breaker.on_failure); a query the
        provider refused (the caller's) counts nothing, but ends a probe as a success: the
        provider answered. Anything else (cancelled, deadline reached, answered from the cache,
        not asked, a failure after searching) says nothing of the provider, and a probe that
        said nothing is given back (breaker.release_probe) for the next run to take."""
        now = self.clock()
        failure = outcome.failure
        from_cache = answered_by_cache(outcome)
        token = gate.probe_token

        def change(health: PlatformHealth | None) -> PlatformHealth | None:
            if outcome.state is PlatformState.SUCCEEDED and not from_cache:
                return breaker.on_success(health, now)
            if outcome.state is PlatformState.FAILED and failure is not None:
                if breaker.counts_against_provider(failure):
                    return breaker.on_failure(health, name, failure, now)
                if failure is FailureKind.QUERY and token is not None:
                    return breaker.on_success(health, now)
            return None if token is None else breaker.release_probe(health, token, now)

        noted = Logged(name, change)
        try:
            self.store.update_health(name, noted)
        except Exception:
            log.warning("could not record %s's outcome in its breaker", name, exc_info=True)
            return
        noted.log_transition()

    def observe_latency(self, name: str, outcome: Outcome) -> None:
        """Fold a run's searching time into the platform's health. Only runs that asked the
        provider count (a cache hit or a failure says nothing of its latency), and health is
        advice: a store error here is logged, never the run's failure. The store is read only
        when a sample may be written (health.due)."""
        seconds = warm_seconds(outcome.timings, Stage.SEARCHING.value)
        cold = outcome.timings.get(COLD_START)
        asked = outcome.state is PlatformState.SUCCEEDED and not answered_by_cache(outcome)
        if not asked or seconds is None:
            return
        now = self.clock()
        if name in self._health and not due(self._health[name], now) and cold is None:
            return
        try:
            # one atomic read-modify-write: the breaker's fields are written by other runs
            self._health[name] = self.store.update_health(
                name, lambda stored: observed(stored, name, seconds, now, cold)
            )
        except Exception:
            log.warning("could not record %s's latency", name, exc_info=True)


class Logged:
    """A health change that notes what it wrote, so the breaker's transitions become event
    lines (events.breaker_changed) that the log-based metrics count (infra/monitoring.tf).

    A store may run the change more than once (a lost race reads again): only the last run,
    the one written, counts, and it is logged once the write returned (`log_transition`).
    """

    def __init__(self, name: str, change: HealthChange) -> None:
        self.name, self.change = name, change
        self.moved: PlatformHealth | None = None

    def __call__(self, health: PlatformHealth | None) -> PlatformHealth | None:
        written = self.change(health)
        before = health.state if health is not None else BreakerState.CLOSED
        self.moved = written if written is not None and written.state is not before else None
        return written

    def log_transition(self) -> None:
        if self.moved is not None:
            events.breaker_changed(self.name, self.moved)


def answered_by_cache(outcome: Outcome) -> bool:
    """Wholly from the cache: the provider was not asked, so the run says nothing of it."""
    return outcome.cache is not None and outcome.cache.state is CacheState.HIT


def suspended(name: str, gate: breaker.Gate) -> Outcome:
    """The run's answer when its breaker is open: at once, no provider call."""
    reason = gate.reason.value if gate.reason else "failures"
    until = gate.retry_at.isoformat(timespec="seconds") if gate.retry_at else "a probe ends"
    error = f"{name}: suspended after {reason.replace('_', ' ')} until {until}"
    return Outcome(
        state=PlatformState.SUSPENDED,
        error=error,
        message=f"Suspended: {reason.replace('_', ' ')}, retry at {until}",
        retry_at=gate.retry_at,
    )
