"""A scripted history of searches, as the store keeps them, with the figures it must give.

Shared by the rules' unit test, the store contract (every backend reads it back) and the CLI
test (`fanfuse stats` over a SQLite file holding it). The expected figures are worked out by
hand in EXPECTED from the documents below, not computed by the code under test.

Five searches within the last hour on three platforms (and one from two days ago, outside the
default 24 h window, that must not count):

- alpha (paid: 2 calls at $0.005 a run) succeeds five times in 0.1, 0.2, 0.3, 0.4 and 1.0 s;
- beta succeeds once in 0.5 s, fails on a 429 (its kind stored), times out, fails on a 503
  (no kind stored: an older document; its last call's status says `error`), and succeeds once
  wholly from the cache (2 hits: no latency sample);
- gamma succeeds in 2.0 s half from the cache (1 hit, 1 miss), is cancelled, suspended, still
  running in s4 (s4 is unfinished: its results do not count), and succeeds in 3.0 s.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fanfuse.rules.stats_figures import Recorded
from fanfuse.wire.models import (
    CacheNote,
    CacheState,
    CallRecord,
    FailureKind,
    PlatformRun,
    PlatformState,
    Result,
    Task,
    TaskStatus,
)
from fanfuse.wire.options import CacheMode
from tests.support.fakes import make_task

TEAM, OTHER = "key:team", "key:other"
PLATFORMS = ["alpha", "beta", "gamma"]


def _run(task: Task, name: str, state: PlatformState, **fields: Any) -> PlatformRun:
    index = PLATFORMS.index(name) + 1
    return PlatformRun(task_id=task.task_id, name=name, index=index, of=3, state=state, **fields)


def _paid(seconds: float) -> dict[str, Any]:
    call = CallRecord(platform="alpha", status=200, attempts=1, seconds=seconds, cost_usd=0.005)
    return {"timings": {"searching": seconds}, "calls": [call, call]}


def _result(rank: int, *platforms: str) -> Result:
    ranks = {p: rank for p in platforms}
    return Result(
        rank=rank,
        score=1.0 / rank,
        platform=platforms[0],
        platforms=list(platforms),
        ranks=ranks,
        title=f"r{rank}",
        url=f"https://e.test/{rank}",
        retrieved_at=datetime(2026, 1, 1),
    )


def _task(
    task_id: str, created: datetime, owner: str, status: TaskStatus, *results: Result
) -> Task:
    task, _ = make_task(task_id, PLATFORMS)
    return task.model_copy(
        update={
            "owner": owner,
            "status": status,
            "created_at": created,
            "updated_at": created,
            "deadline_at": created + timedelta(minutes=2),
            "expires_at": created + timedelta(days=3),
            "results": list(results),
        }
    )


def history(now: datetime) -> list[Recorded]:
    """The searches, newest first (s5 .. s1, then the old s0)."""
    ok, failed = PlatformState.SUCCEEDED, PlatformState.FAILED
    s1 = _task(
        "s1",
        now - timedelta(minutes=50),
        TEAM,
        TaskStatus.COMPLETED,
        *(_result(1, "alpha", "beta"), _result(2, "alpha"), _result(3, "gamma")),
        _result(4, "beta"),
    )
    s2 = _task(
        "s2",
        now - timedelta(minutes=40),
        TEAM,
        TaskStatus.PARTIAL,
        _result(1, "alpha"),
        _result(2, "alpha"),
    )
    s3 = _task(
        "s3", now - timedelta(minutes=30), TEAM, TaskStatus.PARTIAL, _result(1, "alpha", "gamma")
    )
    s4 = _task("s4", now - timedelta(minutes=20), TEAM, TaskStatus.RUNNING, _result(1, "gamma"))
    s5 = _task(
        "s5",
        now - timedelta(minutes=10),
        OTHER,
        TaskStatus.COMPLETED,
        _result(1, "alpha", "beta", "gamma"),
        _result(2, "beta"),
    )
    s0 = _task("s0", now - timedelta(days=2), TEAM, TaskStatus.COMPLETED, _result(1, "beta"))
    cache_hit = CacheNote(state=CacheState.HIT, mode=CacheMode.AUTO, hits=2, misses=0)
    half = CacheNote(state=CacheState.PARTIAL, mode=CacheMode.AUTO, hits=1, misses=1)
    status_503 = CallRecord(platform="beta", status=503, attempts=3, seconds=0.2)
    return [
        Recorded(
            s5,
            [
                _run(s5, "alpha", ok, **_paid(1.0)),
                _run(s5, "beta", ok, cache=cache_hit, timings={"searching": 0.01}),
                _run(s5, "gamma", ok, timings={"searching": 3.0}),
            ],
        ),
        Recorded(
            s4,
            [
                _run(s4, "alpha", ok, **_paid(0.4)),
                _run(s4, "beta", failed, calls=[status_503], error="beta: 503"),
                _run(s4, "gamma", PlatformState.RUNNING),
            ],
        ),
        Recorded(
            s3,
            [
                _run(s3, "alpha", ok, **_paid(0.3)),
                _run(s3, "beta", PlatformState.TIMED_OUT),
                _run(s3, "gamma", PlatformState.SUSPENDED),
            ],
        ),
        Recorded(
            s2,
            [
                _run(s2, "alpha", ok, **_paid(0.2)),
                _run(s2, "beta", failed, failure=FailureKind.RATE_LIMITED, error="beta: 429"),
                _run(s2, "gamma", PlatformState.CANCELLED),
            ],
        ),
        Recorded(
            s1,
            [
                _run(s1, "alpha", ok, **_paid(0.1)),
                _run(s1, "beta", ok, timings={"searching": 0.5}),
                _run(s1, "gamma", ok, cache=half, timings={"searching": 2.0}),
            ],
        ),
        Recorded(s0, [_run(s0, "beta", ok, timings={"searching": 9.0})]),
    ]


EXPECTED: dict[str, dict[str, Any]] = {
    "alpha": {
        "runs": 5,
        "outcomes": {"succeeded": 5},
        "errors": {},
        # p50 of [.1 .2 .3 .4 1.0] is .3; p95 at rank 3.8: .4 + .8 * (1.0 - .4) = .88
        "latency_p50_s": 0.3,
        "latency_p95_s": 0.88,
        "latency_samples": 5,
        "cache_hit_rate": None,
        # s1: 2 (1 alone), s2: 2 (2 alone), s3: 1, s5: 1
        "results": 6,
        "unique_results": 3,
        "provider_calls": 10,
        "spend_usd": 0.05,
    },
    "beta": {
        "runs": 5,
        "outcomes": {"succeeded": 2, "failed": 2, "timed_out": 1},
        "errors": {"error": 1, "rate_limited": 1},
        "latency_p50_s": 0.5,
        "latency_p95_s": 0.5,
        "latency_samples": 1,
        "cache_hits": 2,
        "cache_misses": 0,
        "cache_hit_rate": 1.0,
        # s1: 2 (1 alone), s5: 2 (1 alone)
        "results": 4,
        "unique_results": 2,
        "provider_calls": 1,
        "spend_usd": 0.0,
    },
    "gamma": {
        "runs": 5,
        "outcomes": {"succeeded": 2, "cancelled": 1, "suspended": 1, "unfinished": 1},
        "errors": {},
        # [2.0, 3.0]: p50 2.5; p95 at rank .95: 2.0 + .95 = 2.95
        "latency_p50_s": 2.5,
        "latency_p95_s": 2.95,
        "latency_samples": 2,
        "cache_hits": 1,
        "cache_misses": 1,
        "cache_hit_rate": 0.5,
        # s1: 1 alone, s3: 1, s5: 1 (s4 unfinished: not counted)
        "results": 3,
        "unique_results": 1,
        "spend_usd": 0.0,
    },
}
EXPECTED_SEARCHES = 5
EXPECTED_FINISHED = 4
EXPECTED_SPEND = 0.05


def check_figures(stats: dict[str, Any]) -> None:
    """`stats` (a Stats as JSON) holds EXPECTED for every platform."""
    assert stats["searches"] == EXPECTED_SEARCHES
    assert stats["finished"] == EXPECTED_FINISHED
    assert stats["spend_usd"] == EXPECTED_SPEND
    by_name = {p["name"]: p for p in stats["platforms"]}
    for name, figures in EXPECTED.items():
        got = by_name[name]
        outcomes = {k: v for k, v in got["outcomes"].items() if v}
        assert outcomes == figures["outcomes"], (name, outcomes)
        for key, value in figures.items():
            if key != "outcomes":
                assert got[key] == value, (name, key, got[key], value)
