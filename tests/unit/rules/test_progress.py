"""The progress formula and the message formats of the design, for 1 and 3 platforms."""

from __future__ import annotations

import pytest

from fanfuse.rules import progress
from fanfuse.wire.models import PlatformRun, PlatformState, Stage


def run(name: str, index: int, of: int, state: PlatformState, percent: float = 0) -> PlatformRun:
    return PlatformRun(task_id="t", name=name, index=index, of=of, state=state, percent=percent)


def test_stage_percent_shares() -> None:
    all4 = list(Stage)
    assert progress.stage_percent(all4, Stage.SEARCHING, 0, 0) == 0
    assert progress.stage_percent(all4, Stage.RESOLVING, 5, 10) == 37.5
    assert progress.stage_percent(all4, Stage.COMPRESSING, 10, 10) == 100
    assert progress.stage_percent([Stage.SEARCHING], Stage.SEARCHING, 1, 2) == 50


def test_overall_is_mean_of_platforms() -> None:
    runs = [
        run("docs", 1, 3, PlatformState.SUCCEEDED),
        run("vectors", 2, 3, PlatformState.RUNNING, percent=50),
        run("google", 3, 3, PlatformState.QUEUED, percent=80),
    ]
    assert progress.overall_percent(runs) == pytest.approx(50.0)


def test_sequential_equivalence() -> None:
    """Platforms one after another: (completed x 100 + current) / total."""
    runs = [
        run("a", 1, 3, PlatformState.SUCCEEDED),
        run("b", 2, 3, PlatformState.RUNNING, percent=40),
        run("c", 3, 3, PlatformState.QUEUED),
    ]
    assert progress.overall_percent(runs) == pytest.approx((1 * 100 + 40) / 3, abs=0.01)


def test_failed_platforms_count_as_done() -> None:
    runs = [run("a", 1, 2, PlatformState.FAILED), run("b", 2, 2, PlatformState.TIMED_OUT)]
    assert progress.overall_percent(runs) == 100


def test_single_platform_names_and_messages() -> None:
    assert progress.stage_name("docs", "searching", 1) == "searching"
    assert progress.platform_message(1, 1, "docs", progress.found_message(10)) == (
        "Searching: Found 10 results"
    )
    summary = progress.summarize([run("docs", 1, 1, PlatformState.SUCCEEDED)], 10)
    assert summary.message == "Search completed: 10 results"


def test_three_platform_names_and_messages() -> None:
    assert progress.stage_name("google", "fetching_content", 3) == "google_fetching_content"
    msg = progress.platform_message(2, 3, "vectors", progress.found_message(7))
    assert msg == "Platform 2/3 (vectors): Searching: Found 7 results"
    runs = [
        run("docs", 1, 3, PlatformState.SUCCEEDED),
        run("vectors", 2, 3, PlatformState.FAILED),
        run("google", 3, 3, PlatformState.SUCCEEDED),
    ]
    summary = progress.summarize(runs, 18)
    assert summary.message == (
        "Multi-platform search completed: 2/3 platforms, 18 total results (1 failed)"
    )
    assert (summary.succeeded, summary.failed, summary.timed_out) == (2, 1, 0)


def test_resolving_message_format() -> None:
    assert progress.stage_message(Stage.RESOLVING, "8/10 successful (2 failed)") == (
        "Resolving URLs: 8/10 successful (2 failed)"
    )
