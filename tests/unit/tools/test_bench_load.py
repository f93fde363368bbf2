"""`fanfuse bench load`: the clients' bookkeeping, and a small run on the embedded runtime."""

from __future__ import annotations

import asyncio
import json
from itertools import count

from typer.testing import CliRunner

from fanfuse.cli.main import app
from fanfuse.tools.bench.load import Outcome, drive, percentiles

FIELDS = {"runtime", "searches", "terminal", "completed", "errors", "throughput_per_s", "latency_s"}


def test_drive_starts_exactly_n_and_counts_failures_without_raising() -> None:
    numbers = count()
    in_flight = 0
    most = 0

    async def one() -> Outcome:
        nonlocal in_flight, most
        n = next(numbers)
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        if n % 4 == 1:
            raise TimeoutError("too slow")
        return Outcome(status="failed" if n % 4 == 2 else "completed", latency=0.1 * n)

    result = asyncio.run(drive("fake", 10, 3, one))
    assert (result.searches, result.terminal, result.completed, result.errors) == (10, 7, 5, 5)
    assert most == 3
    assert result.error_reasons == {"TimeoutError: too slow": 3, "ended failed": 2}
    assert result.latency_s.p50 is not None and result.throughput_per_s > 0


def test_percentiles_of_none_one_and_many() -> None:
    assert percentiles([]).p50 is None
    assert percentiles([2.0]).p99 == 2.0
    many = percentiles([float(n) for n in range(1, 101)])
    assert (many.p50, many.p95, many.p99) == (50.5, 95.05, 99.01)


def test_a_small_embedded_load_ends_every_search() -> None:
    argv = ["bench", "load", "--searches", "6", "--concurrency", "3", "--json"]
    argv += ["--no-stack", "--no-aws", "--no-serve"]  # the embedded runtime alone
    argv += ["--delays", "0.05,0.1,0.2"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    (embedded,) = json.loads(result.stdout)
    assert set(embedded) == FIELDS and set(embedded["latency_s"]) == {"p50", "p95", "p99"}
    assert embedded["runtime"] == "embedded"
    assert embedded["searches"] == embedded["terminal"] == embedded["completed"] == 6
    assert embedded["errors"] == 0
