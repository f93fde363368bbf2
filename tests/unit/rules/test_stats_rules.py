"""The stats' pure rules (rules/stats_figures.py) over the scripted history
(tests/support/stats_history.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fanfuse.rules import health, stats_figures
from fanfuse.wire.models import (
    BreakerState,
    CallRecord,
    FailureKind,
    PlatformHealth,
    PlatformRun,
    PlatformState,
)
from tests.support.stats_history import EXPECTED, check_figures, history

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
DAY = timedelta(hours=24)


def test_the_scripted_history_gives_the_expected_figures() -> None:
    healths = {
        "beta": PlatformHealth(
            name="beta",
            updated_at=NOW,
            state=BreakerState.OPEN,
            reason=FailureKind.RATE_LIMITED,
            retry_at=NOW + timedelta(minutes=3),
        ),
        "delta": PlatformHealth(name="delta", updated_at=NOW),  # no run in the window
    }
    got = stats_figures.compute(history(NOW), healths, now=NOW, window=DAY, scope="all")
    check_figures(got.model_dump(mode="json"))
    by_name = {p.name: p for p in got.platforms}
    assert [p.name for p in got.platforms] == ["alpha", "beta", "delta", "gamma"]
    assert by_name["beta"].breaker is BreakerState.OPEN and by_name["beta"].retry_at is not None
    assert by_name["alpha"].breaker is None  # never recorded
    assert by_name["delta"].runs == 0 and by_name["delta"].breaker is BreakerState.CLOSED
    assert got.oldest == NOW - timedelta(minutes=50)


def test_the_window_leaves_older_searches_out() -> None:
    wide = stats_figures.compute(history(NOW), {}, now=NOW, window=timedelta(days=3), scope="all")
    assert wide.searches == 6  # s0 too: its beta run and its unique result
    beta = next(p for p in wide.platforms if p.name == "beta")
    assert beta.runs == EXPECTED["beta"]["runs"] + 1
    assert beta.unique_results == EXPECTED["beta"]["unique_results"] + 1
    narrow = stats_figures.compute(
        history(NOW), {}, now=NOW, window=timedelta(minutes=25), scope="all"
    )
    assert narrow.searches == 2 and narrow.finished == 1  # s5 and the running s4


@pytest.mark.parametrize(
    ("samples", "q", "expected"),
    [([], 0.5, None), ([7.0], 0.95, 7.0), ([4, 1, 3, 2], 0.5, 2.5), ([1, 2, 3, 4], 0.95, 3.85)],
)
def test_percentile_interpolates_between_ranks(
    samples: list[float], q: float, expected: float | None
) -> None:
    assert health.percentile(samples, q) == expected


def test_a_failed_run_without_a_stored_kind_is_read_from_its_last_answer() -> None:
    def failed(status: int | None, failure: FailureKind | None = None) -> PlatformRun:
        calls = [] if status is None else [CallRecord(platform="p", status=status)]
        run = PlatformRun(task_id="t", name="p", index=1, of=1, state=PlatformState.FAILED)
        return run.model_copy(update={"calls": calls, "failure": failure})

    assert stats_figures.failure_kind(failed(429)) is FailureKind.RATE_LIMITED
    assert stats_figures.failure_kind(failed(403)) is FailureKind.DENIED
    assert stats_figures.failure_kind(failed(400)) is FailureKind.QUERY
    assert stats_figures.failure_kind(failed(None)) is FailureKind.ERROR
    assert stats_figures.failure_kind(failed(200, FailureKind.CAPTCHA)) is FailureKind.CAPTCHA
    ok = PlatformRun(task_id="t", name="p", index=1, of=1, state=PlatformState.SUCCEEDED)
    assert stats_figures.failure_kind(ok) is None
