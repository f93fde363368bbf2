"""`fanfuse bench latency`: how close a fan-out search gets to its physical limit.

A local stub SearXNG server answers each platform after a fixed delay (0.2, 0.5 and 1.0 s by
default), so the best any runtime can do is the slowest delay: platforms run in parallel and the
search is done when the slowest one is. Measured, over several runs each, from the request to
the moment a poller sees a terminal status:

- `embedded`: the embedded runtime (SQLite, in-process queue), polled in process;
- `emulator`: the local cloud stack (Firestore and Cloud Tasks emulators, functions-framework
  processes), driven over HTTP like an app would, polling `status_url`;
- `aws`: the local AWS stack (moto's DynamoDB and SQS, the Lambda handlers run by a local
  front and queue dispatcher: `fanfuse dev --cloud aws`), driven over HTTP the same way;
- `sequential`: the baseline of the original design, platforms searched one after another in
  one process and then fused (no store at all, so it is the best case of that design).

The first run of each runtime warms it up (imports, connection pools, a function's cold start)
and is reported apart, not in the medians. The poll interval bounds how late a poller sees the
end: it is part of what is measured, and printed.

The stub server is `fanfuse.testing.StubSearxServer`, which the end-to-end tests share.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel

from fanfuse.settings import ExtraPlatform, Settings
from fanfuse.testing import RESULTS_PER_PAGE, StubSearxServer, extra_platforms_env, stub_platforms

DEFAULT_DELAYS = (0.2, 0.5, 1.0)
DEFAULT_RUNS = 5
DEFAULT_POLL = 0.05
CACHE_POLL = 0.01
"""`bench cache` polls more often: a cached search is done in milliseconds (see bench_cache.py)."""
EMBEDDED_TARGET = 1.15
STACK_TARGET = 1.5
Number = TypeVar("Number", int, float)

# ---------------------------------------------------------------------------------------------
# Measurements


class Samples(BaseModel):
    """The measured runs of one series (seconds, or operations a second), and their median."""

    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


class Series(Samples):
    """One runtime's timings: the warm-up run, then the measured runs."""

    runtime: str
    warmup: float


class LatencyReport(BaseModel):
    delays: list[float]
    runs: int
    poll: float
    series: list[Series]

    @property
    def limit(self) -> float:
        return max(self.delays)

    def get(self, runtime: str) -> Series | None:
        return next((s for s in self.series if s.runtime == runtime), None)

    def ratios(self) -> dict[str, tuple[float, float | None]]:
        """runtime -> (median / physical limit, median / sequential median)."""
        sequential = self.get("sequential")
        return {
            s.runtime: (
                s.median / self.limit,
                s.median / sequential.median if sequential is not None else None,
            )
            for s in self.series
        }

    def render(self) -> str:
        delays = ", ".join(f"{d:g}" for d in self.delays)
        lines = [
            f"fanfuse bench latency: {len(self.delays)} platforms answering after {delays} s; "
            f"{self.runs} runs each after one warm-up run; poll every {self.poll:g} s",
            f"{'runtime':<11}{'median':>9}{'min':>9}{'max':>9}{'warm-up':>10}"
            f"{'x limit':>10}{'x sequential':>14}",
        ]
        for s in self.series:
            to_limit, to_seq = self.ratios()[s.runtime]
            seq = f"{to_seq:.2f}x" if to_seq is not None else "-"
            lines.append(
                f"{s.runtime:<11}{s.median:>8.3f}s{min(s.samples):>8.3f}s{max(s.samples):>8.3f}s"
                f"{s.warmup:>9.3f}s{to_limit:>9.2f}x{seq:>14}"
            )
        lines.append(
            f"physical limit (slowest platform): {self.limit:g} s; "
            f"sum of the delays: {sum(self.delays):g} s"
        )
        targets = (("embedded", EMBEDDED_TARGET), ("emulator", STACK_TARGET), ("aws", STACK_TARGET))
        for runtime, target in targets:
            found = self.get(runtime)
            if found is not None:
                ratio = found.median / self.limit
                verdict = "met" if ratio <= target else "MISSED"
                lines.append(f"target {runtime} <= {target:g}x the limit: {verdict} ({ratio:.2f}x)")
        return "\n".join(lines)


def bench_payload(names: Sequence[str]) -> dict[str, Any]:
    """The same search each run, always asking the platforms (a cached answer is another bench:
    `fanfuse bench cache`)."""
    return {
        "query": "fan-out latency",
        "platform": list(names),
        "max_results": RESULTS_PER_PAGE,
        "cache": "bypass",
    }


async def measure_embedded(
    platforms: dict[str, ExtraPlatform], runs: int, poll: float, workdir: Path
) -> Series:
    """Start -> terminal status seen by an in-process poller, on the embedded runtime."""
    from fanfuse.runtime import EmbeddedRuntime

    settings = Settings(db_path=workdir / "bench.db", extra_platforms=platforms)
    timings: list[float] = []
    async with EmbeddedRuntime(settings) as runtime:
        for _ in range(runs + 1):
            started = time.perf_counter()
            accepted = runtime.service.start(bench_payload(list(platforms)))
            view = await runtime.wait(accepted.task_id, poll=poll)
            timings.append(time.perf_counter() - started)
            check_completed(view.status.value, "embedded")
    return Series(runtime="embedded", warmup=timings[0], samples=timings[1:])


async def measure_sequential(platforms: dict[str, ExtraPlatform], runs: int) -> Series:
    """The original design: each platform searched after the previous one, then fused."""
    from fanfuse import fusers, fusion
    from fanfuse.platforms import Registry
    from fanfuse.platforms.base import PlatformContext, SearchParams
    from fanfuse.stages.searching import ranked

    registry = Registry(extra=platforms)
    params = SearchParams(queries=["fan-out latency"], limit=RESULTS_PER_PAGE)
    timings: list[float] = []
    for _ in range(runs + 1):
        started = time.perf_counter()
        lists = {}
        for name in platforms:
            platform = registry.get(name)
            ctx = PlatformContext(settings=platform.load_settings())
            lists[name] = ranked(await platform.search(ctx, params), params.limit)
        fusion.fuse_queries(params.queries, lists, fusers.DEFAULT_FUSION, params.limit)
        timings.append(time.perf_counter() - started)
    return Series(runtime="sequential", warmup=timings[0], samples=timings[1:])


STACK_RUNTIMES = {"gcp": "emulator", "aws": "aws"}
"""The series name of each local cloud stack."""


def measure_stack(
    platforms: dict[str, ExtraPlatform], runs: int, poll: float, workdir: Path, cloud: str = "gcp"
) -> Series:
    """POST start_search -> terminal status seen polling `status_url`, on a local cloud stack:
    the GCP one (`emulator`: Firestore and Cloud Tasks emulators, functions), or the AWS one
    (`aws`: moto's DynamoDB and SQS, the Lambda handlers' local process)."""
    from fanfuse.devstack import AwsStack, LocalStack

    env = {"FANFUSE_EXTRA_PLATFORMS": extra_platforms_env(platforms)}
    logs = workdir / "logs" / cloud
    names = list(platforms)
    stack = AwsStack(names, extra_env=env, log_dir=logs) if cloud == "aws" else None
    with stack or LocalStack(names, extra_env=env, log_dir=logs) as addresses:
        url = addresses.functions["start_search"]
        runtime = STACK_RUNTIMES[cloud]
        payload = bench_payload(names)
        return asyncio.run(_measure_http(url, addresses.api_key, payload, runs, poll, runtime))


async def _measure_http(
    url: str,
    api_key: str | None,
    payload: dict[str, Any],
    runs: int,
    poll: float,
    runtime: str = "emulator",
) -> Series:
    """Searches through the HTTP client, on one connection pool (as an app would keep it), as
    the stack's `local` key."""
    from fanfuse.client import HttpSearchClient, api_http

    timings: list[float] = []
    async with api_http(30) as http:
        client = HttpSearchClient(url, poll=poll, http=http, api_key=api_key)
        for _ in range(runs + 1):
            started = time.perf_counter()
            view = await client.search(payload)
            timings.append(time.perf_counter() - started)
            check_completed(view.status.value, runtime)
    return Series(runtime=runtime, warmup=timings[0], samples=timings[1:])


def check_completed(status: str, runtime: str) -> None:
    if status != "completed":
        raise RuntimeError(f"{runtime}: a benchmark search ended {status}, not completed")


def run_latency(
    delays: Sequence[float] = DEFAULT_DELAYS,
    runs: int = DEFAULT_RUNS,
    poll: float = DEFAULT_POLL,
    *,
    stack: bool = True,
    aws: bool = True,
) -> LatencyReport:
    """Run the measurements against one stub server; see the module docstring."""
    with (
        StubSearxServer() as stub,
        tempfile.TemporaryDirectory(prefix="fanfuse-bench-") as tmp,
    ):
        workdir = Path(tmp)
        platforms = stub_platforms(stub, delays)
        series = [asyncio.run(measure_embedded(platforms, runs, poll, workdir))]
        for cloud, wanted in (("gcp", stack), ("aws", aws)):
            if wanted:
                series.append(measure_stack(platforms, runs, poll, workdir, cloud))
        series.append(asyncio.run(measure_sequential(platforms, runs)))
    return LatencyReport(delays=list(delays), runs=runs, poll=poll, series=series)


# ---------------------------------------------------------------------------------------------
# CLI: `app.add_typer(bench_app, name="bench")`

bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks.")


@bench_app.callback()
def _bench() -> None:
    """Benchmarks: `fanfuse bench latency`, `fanfuse bench load`, `fanfuse bench cache`,
    `fanfuse bench serve`, `fanfuse bench quota`."""


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
    as_json: JsonOption = False,
) -> None:
    """Time fan-out searches against stub platforms: embedded, emulator stack, AWS stack on
    moto, sequential."""
    report = run_latency(_parse_delays(delays), runs, poll, stack=stack, aws=aws)
    typer.echo(report.model_dump_json(indent=2) if as_json else report.render())


@bench_app.command("load")
def load(
    searches: Annotated[int, typer.Option(min=1, help="searches in all")] = 200,
    concurrency: Annotated[int, typer.Option(min=1, max=256, help="concurrent clients")] = 16,
    delays: DelaysOption = ",".join(f"{d:g}" for d in DEFAULT_DELAYS),
    timeout: Annotated[float, typer.Option(min=1, help="seconds one search may take")] = 60.0,
    stack: Annotated[bool, typer.Option(help="also load the emulator stack")] = True,
    as_json: JsonOption = False,
) -> None:
    """Run N searches from C concurrent clients on each runtime: throughput and latency."""
    from fanfuse.bench_load import run_load  # it imports this module: imported on use

    report = run_load(searches, concurrency, _parse_delays(delays), timeout, stack=stack)
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
    from fanfuse.bench_cache import run_cache  # it imports this module: imported on use

    report = run_cache(_parse_delays(delays), runs, poll)
    typer.echo(report.model_dump_json(indent=2) if as_json else report.render())


@bench_app.command("serve")
def serve(
    runs: Annotated[int, typer.Option(min=2, help="warm POST /search runs")] = 20,
    cold_runs: Annotated[int, typer.Option(min=1, help="cold `fanfuse search` processes")] = 3,
    as_json: JsonOption = False,
) -> None:
    """Time warm POST /search on `fanfuse serve` against cold `fanfuse search` processes."""
    from fanfuse.bench_serve import run_serve

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
    from fanfuse.bench_quota import run_quota

    report = run_quota(runs, ops, _parse_threads(threads), firestore=firestore)
    typer.echo(report.model_dump_json(indent=2) if as_json else report.render())
