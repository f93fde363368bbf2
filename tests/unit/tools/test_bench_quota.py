"""`fanfuse bench quota`: the report's format and verdicts, and a bounded real run on SQLite (no
emulator, no timing assertions)."""

from __future__ import annotations

from typer.testing import CliRunner

from fanfuse.cli.bench import bench_app
from fanfuse.tools.bench.quota import SERIES, BurstTail, QuotaReport, Rate, ops_per_second


def report(start_rates: tuple[float, float], take_rate: float) -> QuotaReport:
    free, limited = start_rates
    rates = dict(zip(SERIES, (take_rate, take_rate * 2, take_rate, free, limited), strict=True))
    return QuotaReport(
        runs=3,
        ops=100,
        series=[
            Rate(store="sqlite", what=what, threads=1, samples=[rate * 0.9, rate, rate * 1.1])
            for what, rate in rates.items()
        ],
        tails=[BurstTail(per_minute=600, shards=20, first_refusal=[500, 525, 575])],
    )


def test_the_report_names_every_series_the_share_and_the_bottleneck() -> None:
    text = report((40.0, 30.0), 900.0).render()
    lines = text.splitlines()
    assert lines[0].startswith("fanfuse bench quota: one caller as fast as it can; medians of 3")
    assert lines[1].split() == ["store", "series", "threads", "median/s", "min/s", "max/s"]
    assert lines[2].split() == ["sqlite", "take/admitted", "1", "900.0", "810.0", "990.0"]
    assert (
        "sqlite, 1 threads: the limiter (a take 1.11 ms + a count 1.11 ms) admits up to 450 "
        "starts/s; start_search 40.0/s without it, 30.0/s with it; the limiter's share of a "
        "start 6.7% by its parts (25.0% by the medians); the bottleneck: start_search itself"
    ) in text
    assert (
        "burst tail: 600/min in 20 shards, trying at most 3: first refusal after 500, 525, 575 "
        "of 600 starts"
    ) in text
    slow = report((40.0, 30.0), 20.0).render()
    assert "the bottleneck: the limiter" in slow


def test_ops_per_second_runs_exactly_ops_calls_over_the_threads() -> None:
    calls: list[int] = []
    assert ops_per_second(lambda: calls.append(1), 10, 3) > 0
    assert len(calls) == 10


def test_the_command_measures_sqlite_in_a_bounded_run() -> None:
    result = CliRunner().invoke(
        bench_app, ["quota", "--runs", "1", "--ops", "10", "--threads", "1,2", "--no-firestore"]
    )
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines() if line.startswith("sqlite ")]
    assert len(rows) == 2 * len(SERIES)
    assert {(r[1], r[2]) for r in rows} == {
        (what, threads) for what in SERIES for threads in ("1", "2")
    }
    assert result.output.count("the bottleneck: ") == 2  # one verdict per thread count
    assert result.output.count("burst tail:") == 2
    bad = CliRunner().invoke(bench_app, ["quota", "--threads", "0"])
    assert bad.exit_code != 0 and "thread counts from 1 to 64" in bad.output
