"""A platform's cold start (loading a model or an index into a fresh process) is not latency:
the health estimate that `fast` mode ranks by, the stats' percentiles and the metrics' samples
leave it out, and report it apart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fanfuse.platforms.contract import RunRecord
from fanfuse.platforms.docs import ColdStarts
from fanfuse.rules import health, stats_figures
from fanfuse.rules.stats_figures import Recorded
from fanfuse.wire.models import (
    FusionMethod,
    PlatformHealth,
    PlatformRun,
    PlatformState,
    SearchRequest,
    Task,
    TaskStatus,
)

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def run(name: str, searching: float, cold: float | None = None) -> PlatformRun:
    timings = {"searching": searching, **({health.COLD_START: cold} if cold is not None else {})}
    return PlatformRun(
        task_id="t",
        name=name,
        index=1,
        of=1,
        state=PlatformState.SUCCEEDED,
        timings=timings,
    )


def test_warm_seconds_leave_the_cold_start_out() -> None:
    assert health.warm_seconds({"searching": 8.72, health.COLD_START: 8.70}, "searching") == 0.02
    assert health.warm_seconds({"searching": 0.3}, "searching") == 0.3
    assert health.warm_seconds({health.COLD_START: 1.0}, "searching") is None
    assert health.warm_seconds({"searching": 1.0, health.COLD_START: 1.5}, "searching") == 0.0


def test_a_cold_run_writes_its_cold_start_and_its_warm_latency() -> None:
    first = health.observed(None, "vectors", 0.02, NOW, cold_start_s=8.7)
    assert first is not None
    assert (first.latency_s, first.cold_start_s, first.samples) == (0.02, 8.7, 1)
    # Another process's cold start soon after: written although a sample is not due yet.
    soon = NOW + timedelta(seconds=1)
    again = health.observed(first, "vectors", 0.03, soon, cold_start_s=6.1)
    assert again is not None and again.cold_start_s == 6.1 and again.latency_s == 0.02
    assert health.observed(first, "vectors", 0.03, soon) is None  # warm, not due: nothing


def test_fast_mode_ranks_vectors_by_its_warm_latency() -> None:
    """With the cold load counted, vectors (8.7 s once, 0.02 s after) ranked behind a 1 s web
    platform; left out, it is the quickest."""
    healths = {
        "vectors": PlatformHealth(name="vectors", latency_s=0.02, cold_start_s=8.7, updated_at=NOW),
        "brave": PlatformHealth(name="brave", latency_s=1.0, updated_at=NOW),
    }
    assert health.by_latency(["brave", "vectors"], healths, {}) == ["vectors", "brave"]


def test_stats_count_cold_starts_apart_from_the_latency() -> None:
    task = Task(
        task_id="t",
        owner="o",
        request=SearchRequest(query="q"),
        queries=["q"],
        fusion=FusionMethod.RRF,
        platforms=["vectors"],
        status=TaskStatus.COMPLETED,
        created_at=NOW,
        updated_at=NOW,
        deadline_at=NOW + timedelta(minutes=2),
        expires_at=NOW + timedelta(minutes=30),
    )
    runs = [run("vectors", 8.72, cold=8.7), run("vectors", 0.02), run("vectors", 0.04)]
    assert stats_figures.latency_sample(runs[0]) == 0.02
    got = stats_figures.compute(
        [Recorded(task, runs)], {}, now=NOW, window=timedelta(hours=1), scope="all"
    )
    [vectors] = got.platforms
    assert vectors.latency_p50_s == 0.02 and vectors.latency_p95_s == 0.038
    assert vectors.cold_starts == 1 and vectors.cold_start_p50_s == 8.7


def test_only_the_first_load_in_a_process_is_a_cold_start() -> None:
    starts = ColdStarts()
    first, second, fallback, later = RunRecord(), RunRecord(), RunRecord(), RunRecord()
    with starts.loading("dense:a", first):
        pass
    with starts.loading("dense:a", second):
        pass
    assert health.COLD_START in first.timings and health.COLD_START not in second.timings
    with starts.loading("dense:b", fallback):
        starts.forget("dense:b")  # answered otherwise (BM25 meanwhile): nothing was loaded
    with starts.loading("dense:b", later):
        pass
    assert health.COLD_START not in fallback.timings and health.COLD_START in later.timings
