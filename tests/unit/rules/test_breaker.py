"""The platform breaker's transitions (breaker.py), one table row per transition.

Each row: the stored health before, the event, and the expected stored health after (None: no
write at all, since health is written only when its state changes)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from fanfuse.rules import breaker
from fanfuse.rules.breaker import Verdict
from fanfuse.rules.lifecycle import Outcome
from fanfuse.service.circuit import Circuit
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.errors import Blocked, ProviderError, kind_for_status
from fanfuse.wire.models import BreakerState, FailureKind, PlatformHealth, PlatformState
from tests.support.optional import present

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CLOSED = BreakerState.CLOSED
OPEN = BreakerState.OPEN
HALF = BreakerState.HALF_OPEN


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def health(
    state: BreakerState = CLOSED,
    failures: int = 0,
    retry_in: float | None = None,
    reason: FailureKind | None = None,
    probe_at: float | None = None,
) -> PlatformHealth:
    return PlatformHealth(
        name="p",
        updated_at=T0,
        latency_s=0.4,
        samples=3,
        state=state,
        consecutive_failures=failures,
        reason=reason,
        retry_at=None if retry_in is None else at(retry_in),
        probe_token="someone" if probe_at is not None else None,
        probe_claimed_at=None if probe_at is None else at(probe_at),
    )


Event = Callable[[PlatformHealth | None], PlatformHealth | None]


def fail(kind: FailureKind, now: float = 0.0) -> Event:
    return lambda h: breaker.on_failure(h, "p", kind, at(now))


def succeed(now: float = 0.0) -> Event:
    return lambda h: breaker.on_success(h, at(now))


def probe(now: float) -> Event:
    return lambda h: breaker.claim_probe(h, "me", at(now))


@dataclass(frozen=True)
class Row:
    name: str
    before: PlatformHealth | None
    event: Event
    state: BreakerState | None  # None: nothing written
    failures: int = 0
    retry_in: float | None = None
    reason: FailureKind | None = None


CAPTCHA, RATE, DENIED, ERROR = (
    FailureKind.CAPTCHA,
    FailureKind.RATE_LIMITED,
    FailureKind.DENIED,
    FailureKind.ERROR,
)
QUERY, NOT_ASKED, INTERNAL = FailureKind.QUERY, FailureKind.NOT_ASKED, FailureKind.INTERNAL
PROBED = health(HALF, 3, 5, ERROR, 5)  # a probe claimed at T0+5 s, after 3 errors in a row
PROBED_7 = health(HALF, 7, 5, ERROR, 5)
ROWS = [
    Row("closed, success: no write", health(), succeed(), None),
    Row("none yet, success: no write", None, succeed(), None),
    Row("closed, error 1: counted", health(), fail(ERROR), CLOSED, 1, None, ERROR),
    Row("closed 1, error 2: counted", health(failures=1), fail(ERROR), CLOSED, 2, None, ERROR),
    Row("closed 2, error 3: open 5 s", health(failures=2), fail(ERROR), OPEN, 3, 5, ERROR),
    Row("closed 1, success: reset", health(failures=1), succeed(), CLOSED, 0),
    Row("closed, captcha: open 1 h", health(), fail(CAPTCHA), OPEN, 1, 3600, CAPTCHA),
    Row("none yet, captcha: open 1 h", None, fail(CAPTCHA), OPEN, 1, 3600, CAPTCHA),
    Row("closed, 429: open 3 min", health(), fail(RATE), OPEN, 1, 180, RATE),
    Row("closed, denied: open 3 min", health(), fail(DENIED), OPEN, 1, 180, DENIED),
    Row("open, failure before retry_at: no write", health(OPEN, 3, 5), fail(ERROR, 1), None),
    Row("open, probe before retry_at: refused", health(OPEN, 3, 5), probe(4), None),
    Row("open, probe at retry_at: half_open", health(OPEN, 3, 5, ERROR), probe(5), HALF, 3),
    Row("half_open, probe success: closed", PROBED, succeed(6), CLOSED, 0),
    Row("half_open 3, probe error: open 10 s", PROBED, fail(ERROR, 6), OPEN, 4, 16, ERROR),
    Row("half_open 7, probe error: 2 min cap", PROBED_7, fail(ERROR, 6), OPEN, 8, 126, ERROR),
    Row("half_open, probe 429: open 3 min", PROBED, fail(RATE, 6), OPEN, 4, 186, RATE),
    Row("half_open, live probe: second claim refused", PROBED, probe(100), None),
    Row("half_open, lapsed probe: claimed again", PROBED, probe(306), HALF, 3),
]  # fmt: skip


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_transition(row: Row) -> None:
    after = row.event(row.before)
    if row.state is None:
        assert after is None
        return
    assert after is not None
    assert after.state is row.state
    assert after.consecutive_failures == row.failures
    if row.state is HALF:
        assert after.probe_token == "me" and after.retry_at == present(row.before).retry_at
        return
    assert after.retry_at == (None if row.retry_in is None else at(row.retry_in))
    assert after.reason is row.reason
    assert after.probe_token is None and after.probe_claimed_at is None
    if row.before is not None:
        assert after.latency_s == row.before.latency_s  # a verdict keeps the latency


@pytest.mark.parametrize(
    ("stored", "now", "verdict", "retry_in"),
    [
        (None, 0, Verdict.CALL, None),
        (health(failures=2), 0, Verdict.CALL, None),
        (health(OPEN, 1, 180, FailureKind.RATE_LIMITED), 179, Verdict.SUSPENDED, 180),
        (health(OPEN, 1, 180, FailureKind.RATE_LIMITED), 180, Verdict.PROBE, None),
        (PROBED, 304, Verdict.SUSPENDED, 305),
        (PROBED, 305, Verdict.PROBE, None),
    ],
)
def test_may_call(
    stored: PlatformHealth | None, now: float, verdict: Verdict, retry_in: float | None
) -> None:
    gate = breaker.may_call(stored, at(now))
    assert gate.verdict is verdict
    assert gate.retry_at == (None if retry_in is None else at(retry_in))
    if stored is not None and verdict is not Verdict.CALL:
        assert gate.reason is stored.reason


def test_backoff_doubles_from_5_s_to_2_min() -> None:
    n = breaker.FAILURES_TO_OPEN
    assert [breaker.backoff_s(n + i) for i in range(7)] == [5, 10, 20, 40, 80, 120, 120]


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (429, FailureKind.RATE_LIMITED),
        (401, FailureKind.DENIED),  # our key: the deployment's, and calling on spends the ban
        (403, FailureKind.DENIED),
        (402, FailureKind.DENIED),  # the deployment's paid plan is spent
        (407, FailureKind.DENIED),
        (400, FailureKind.QUERY),  # "query too long": the caller's
        (404, FailureKind.QUERY),
        (413, FailureKind.QUERY),
        (422, FailureKind.QUERY),
        (408, FailureKind.ERROR),  # the provider timed out
        (500, FailureKind.ERROR),
        (503, FailureKind.ERROR),
        (599, FailureKind.ERROR),
        (None, FailureKind.ERROR),  # a timeout or connection failure
        (200, FailureKind.ERROR),  # an answer that could not be used: a malformed body
    ],
)
def test_kind_for_status(status: int | None, kind: FailureKind) -> None:
    assert kind_for_status(status) is kind


@pytest.mark.parametrize(
    ("kind", "counts"),
    [
        (FailureKind.CAPTCHA, True),
        (FailureKind.RATE_LIMITED, True),
        (FailureKind.DENIED, True),
        (FailureKind.ERROR, True),
        (FailureKind.QUERY, False),
        (FailureKind.NOT_ASKED, False),
        (FailureKind.INTERNAL, False),
    ],
)
def test_counts_against_provider(kind: FailureKind, counts: bool) -> None:
    assert breaker.counts_against_provider(kind) is counts


def test_every_kind_is_decided() -> None:
    assert set(FailureKind) == set(breaker.SEVERITY) | {
        FailureKind.QUERY,
        FailureKind.NOT_ASKED,
        FailureKind.INTERNAL,
    }


@pytest.mark.parametrize(
    ("kinds", "kind"),
    [
        ([QUERY, QUERY], QUERY),
        ([QUERY, ERROR], ERROR),  # one 5xx among refused queries: the provider's
        ([ERROR, RATE, QUERY], RATE),  # the longest cool-down met
        ([NOT_ASKED, QUERY], NOT_ASKED),
        ([CAPTCHA], CAPTCHA),
        ([], ERROR),
    ],
)
def test_run_kind(kinds: list[FailureKind], kind: FailureKind) -> None:
    assert breaker.run_kind(kinds) is kind


def test_error_kinds_default_to_the_provider() -> None:
    assert ProviderError("p", "x").fault is ERROR  # unclassified: counted, as before kinds
    assert ProviderError("p", "x", QUERY).fault is QUERY
    assert Blocked("p", "captcha").fault is CAPTCHA


def test_release_probe_gives_back_only_its_own_claim() -> None:
    mine = PROBED.model_copy(update={"probe_token": "me"})
    released = breaker.release_probe(mine, "me", at(10))
    assert released is not None and released.state is OPEN and released.probe_token is None
    assert released.retry_at == mine.retry_at and released.consecutive_failures == 3
    assert breaker.may_call(released, at(10)).verdict is Verdict.PROBE  # the next run probes
    assert breaker.release_probe(PROBED, "me", at(10)) is None  # someone else's probe
    assert breaker.release_probe(health(), "me", at(10)) is None


def circuit(store: SqliteStore) -> Circuit:
    return Circuit(store, lambda: datetime.now(UTC))


def failed(kind: FailureKind) -> Outcome:
    return Outcome(state=PlatformState.FAILED, error="p: HTTP 400", failure=kind)


def test_ten_caller_failures_leave_the_breaker_closed_three_errors_open_it() -> None:
    store = SqliteStore(":memory:")
    rules = circuit(store)
    for _ in range(10):
        assert rules.admit("p").verdict is Verdict.CALL
        rules.record("p", failed(QUERY))
    assert store.get_health().get("p") is None  # nothing counted, nothing written
    for _ in range(3):
        rules.record("p", failed(ERROR))
    assert store.get_health()["p"].state is OPEN


@pytest.mark.parametrize(
    ("kind", "state"),
    [(QUERY, CLOSED), (NOT_ASKED, OPEN), (INTERNAL, OPEN), (ERROR, OPEN)],
)
def test_a_probe_refused_for_the_query_closes_one_not_asked_gives_it_back(
    kind: FailureKind, state: BreakerState
) -> None:
    store = SqliteStore(":memory:")
    rules = circuit(store)
    past = datetime.now(UTC) - timedelta(seconds=1)
    store.update_health(
        "p", lambda _: health(OPEN, 3, None, ERROR).model_copy(update={"retry_at": past})
    )
    gate = rules.admit("p")
    assert gate.verdict is Verdict.PROBE and gate.probe_token is not None
    assert rules.admit("p").verdict is Verdict.SUSPENDED  # one probe at a time
    rules.record("p", failed(kind), gate)
    after = store.get_health()["p"]
    assert after.state is state and after.probe_token is None
    if kind in (NOT_ASKED, INTERNAL):  # said nothing: the next run probes at once
        assert after.consecutive_failures == 3
        assert rules.admit("p").verdict is Verdict.PROBE
