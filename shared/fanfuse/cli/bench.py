"""`fanfuse bench`: the benchmark commands (`app.add_typer(bench_app, name="bench")`).

Each command imports its benchmark when it runs, so `fanfuse --help` does not load them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer

from fanfuse.tools.bench.common import CACHE_POLL, DEFAULT_DELAYS, DEFAULT_POLL, DEFAULT_RUNS

Number = TypeVar("Number", int, float)


bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks.", rich_markup_mode=None)


@bench_app.callback()
def _bench() -> None:
    """Benchmarks: `fanfuse bench latency`, `fanfuse bench load`, `fanfuse bench cache`,
    `fanfuse bench serve`, `fanfuse bench quota`, `fanfuse bench budget`,
    `fanfuse bench hedging`."""


def _parse_list(
    text: str,
    hint: str,
    convert: Callable[[str], Number],
    valid: Callable[[Number], bool],
    rule: str,
) -> list[Number]:
    """A comma-separated option: each item converted, all of them `valid`, else `rule`."""
    try:
        parsed = [convert(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise typer.BadParameter(f"not a list of numbers: {text!r}", param_hint=hint) from None
    if not parsed or not all(valid(item) for item in parsed):
        raise typer.BadParameter(rule, param_hint=hint)
    return parsed


def _parse_delays(delays: str) -> list[float]:
    return _parse_list(
        delays, "--delays", float, lambda d: d >= 0, "give at least one delay, none negative"
    )


def _parse_threads(threads: str) -> list[int]:
    return _parse_list(
        threads, "--threads", int, lambda n: 1 <= n <= 64, "give thread counts from 1 to 64"
    )


RunsOption = Annotated[int, typer.Option(min=1, help="measured runs per series")]
DelaysOption = Annotated[
    str, typer.Option(help="the stub platforms' delays in seconds, comma-separated")
]
JsonOption = Annotated[bool, typer.Option("--json")]


@bench_app.command("latency")
def latency(
    runs: RunsOption = DEFAULT_RUNS,
    delays: DelaysOption = ",".join(f"{d:g}" for d in DEFAULT_DELAYS),
    poll: Annotated[float, typer.Option(min=0.001, help="poll interval, seconds")] = DEFAULT_POLL,
    stack: Annotated[bool, typer.Option(help="also measure the emulator stack")] = True,
    aws: Annotated[bool, typer.Option(help="also measure the AWS stack (moto)")] = True,
    tracing: Annotated[
        bool,
        typer.Option(help="each runtime again with tracing on (a local OTLP receiver): overhead"),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Time fan-out searches against stub platforms: embedded, emulator stack, AWS stack on
    moto, sequential; with --tracing, what tracing costs and the round trips it counts."""
    from fanfuse.tools.bench.latency import run_latency

    report = run_latency(_parse_delays(delays), runs, poll, stack=stack, aws=aws, tracing=tracing)
    typer.echo(report.model_dump_json(indent=2) if as_json else report.render())


@bench_app.command("load")
def load(
    searches: Annotated[int, typer.Option(min=1, help="searches in all")] = 200,
    concurrency: Annotated[int, typer.Option(min=1, max=256, help="concurrent clients")] = 16,
    delays: DelaysOption = ",".join(f"{d:g}" for d in DEFAULT_DELAYS),
    timeout: Annotated[float, typer.Option(min=1, help="seconds one search may take")] = 60.0,
    stack: Annotated[bool, typer.Option(help="also load the emulator stack")] = True,
    aws: Annotated[bool, typer.Option(help="also load the AWS stack (moto)")] = True,
    serve: Annotated[bool, typer.Option(help="also load `fanfuse serve` (POST /search)")] = True,
    embedded: Annotated[bool, typer.Option(help="also load an embedded runtime")] = True,
    as_json: JsonOption = False,
) -> None:
    """Run N searches from C concurrent clients on each runtime: throughput and latency."""
    from fanfuse.tools.bench.load import run_load

    report = run_load(
        searches,
        concurrency,
        _parse_delays(delays),
        timeout,
        stack=stack,
        aws=aws,
        serve=serve,
        embedded=embedded,
    )
    if as_json:
        typer.echo(json.dumps([r.model_dump() for r in report.results], indent=2))
        for r in report.results:  # why searches failed: on stderr, the JSON keeps its shape
            for why, n in r.error_reasons.items():
                typer.echo(f"{r.runtime} error x{n}: {why}", err=True)
    else:
        typer.echo(report.render())


@bench_app.command("cache")
def cache(
    runs: RunsOption = DEFAULT_RUNS,
    delays: DelaysOption = ",".join(f"{d:g}" for d in DEFAULT_DELAYS),
    poll: Annotated[float, typer.Option(min=0.001, help="poll interval, seconds")] = CACHE_POLL,
    as_json: JsonOption = False,
) -> None:
    """Time the same search uncached and cached on the embedded runtime, and their ratio."""
    from fanfuse.tools.bench.cache import run_cache

    report = run_cache(_parse_delays(delays), runs, poll)
    typer.echo(report.model_dump_json(indent=2) if as_json else report.render())


@bench_app.command("serve")
def serve(
    runs: Annotated[int, typer.Option(min=2, help="warm POST /search runs")] = 20,
    cold_runs: Annotated[int, typer.Option(min=1, help="cold `fanfuse search` processes")] = 3,
    as_json: JsonOption = False,
) -> None:
    """Time warm POST /search on `fanfuse serve` against cold `fanfuse search` processes."""
    from fanfuse.tools.bench.serve import run_serve

    try:
        report = run_serve(runs, cold_runs)
    except (RuntimeError, TimeoutError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(report.model_dump_json(indent=2) if as_json else report.render())


@bench_app.command("quota")
def quota(
    runs: RunsOption = DEFAULT_RUNS,
    ops: Annotated[int, typer.Option(min=10, max=100_000, help="operations per run")] = 200,
    threads: Annotated[str, typer.Option(help="thread counts, comma-separated")] = "1,4",
    firestore: Annotated[bool, typer.Option(help="also measure on the Firestore emulator")] = True,
    as_json: JsonOption = False,
) -> None:
    """Time the start-rate limiter alone and start_search with and without it, per store."""
    from fanfuse.tools.bench.quota import run_quota

    report = run_quota(runs, ops, _parse_threads(threads), firestore=firestore)
    typer.echo(report.model_dump_json(indent=2) if as_json else report.render())


@bench_app.command("budget")
def budget(
    runs: RunsOption = DEFAULT_RUNS,
    searches: Annotated[int, typer.Option(min=1, max=1000, help="searches per run")] = 20,
    as_json: JsonOption = False,
) -> None:
    """Time searches (and starts) with and without the budget check: the check's cost ratio."""
    from fanfuse.tools.bench.budget import run_budget

    try:
        report = run_budget(runs, searches)
    except RuntimeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(report.model_dump_json(indent=2) if as_json else report.render())


@bench_app.command("streams")
def streams(
    count: Annotated[int, typer.Option("--streams", min=1, max=1000, help="streams")] = 150,
    seconds: Annotated[float, typer.Option(min=1, max=600, help="the window")] = 10.0,
    as_json: JsonOption = False,
) -> None:
    """Open event streams of one key on one running search of `fanfuse serve`: other callers'
    latency, serve's CPU, and one stream past the cap."""
    from fanfuse.tools.bench.streams import run_streams

    try:
        report = run_streams(count, seconds)
    except (RuntimeError, TimeoutError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(report.model_dump_json(indent=2) if as_json else report.render())


@bench_app.command("hedging")
def hedging(
    searches: Annotated[int, typer.Option(min=2, max=1000, help="searches per series")] = 40,
    every: Annotated[
        int, typer.Option(min=2, help="every n-th primary request is slow (10: a 10 % tail)")
    ] = 10,
    slow: Annotated[float, typer.Option(min=0, help="seconds a slow primary adds")] = 2.8,
    hedge: Annotated[float, typer.Option(min=0, help="hedge_after_s of the hedged series")] = 0.5,
    as_json: JsonOption = False,
) -> None:
    """p50/p95 of searches whose primary has a slow tail, hedged against not hedged."""
    from fanfuse.tools.bench.hedging import run_hedging

    report = run_hedging(searches, every, slow_s=slow, hedge_s=hedge)
    typer.echo(report.model_dump_json(indent=2) if as_json else report.render())
