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

Beside each terminal time, the time to first results: request -> the first status whose fused
`preview` holds a result (the quickest platform's answer, fused), seen by the same poller. The
sequential baseline has none: it fuses once, at the end.

The first run of each runtime warms it up (imports, connection pools, a function's cold start)
and is reported apart, not in the medians. The poll interval bounds how late a poller sees the
end: it is part of what is measured, and printed.

The stub server is `fanfuse.tools.stubs.StubSearxServer`, which the end-to-end tests share.

With `--tracing`, each runtime is measured a second time with tracing on, every process
exporting its spans over OTLP/HTTP to a receiver in this process (`tools/otlp.py`): the ratio
of the medians, on to off, is what tracing costs. The traced runs also give a count no machine
load changes: the store round trips on each worker's critical path, from its delivery to its
fan-in committed (`otlp.critical_path`), per platform run. The machine's load average is
printed with the table: a ratio measured on a busy machine says little.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from fanfuse.settings import Settings
from fanfuse.tools.bench.common import (
    DEFAULT_DELAYS,
    DEFAULT_POLL,
    DEFAULT_RUNS,
    Series,
    bench_payload,
    check_completed,
)
from fanfuse.tools.bench.spent import median_spent, spent_on
from fanfuse.tools.stubs import (
    RESULTS_PER_PAGE,
    StubSearxServer,
    extra_platforms_env,
    stub_platforms,
)
from fanfuse.wire.instances import ExtraPlatform
from fanfuse.wire.models import TaskView

QUIET_LOAD = 1.5
"""Below this load average (1 min) the machine counts as quiet for the targets' verdicts."""
EMBEDDED_TARGET = 1.15
STACK_TARGET = 1.2
"""The cloud stacks: the last fan-in finalizes the search itself (no second queue hop), so they
are held to 1.2x the slowest platform (issue 25; 1.5x while the aggregate task was a hop)."""

# ---------------------------------------------------------------------------------------------
# Measurements


class LatencySeries(Series):
    """One runtime's request -> terminal timings, and request -> first non-empty preview."""

    first_preview: list[float] = Field(
        default_factory=list,
        description="per measured run, seconds to the first status with a non-empty preview "
        "(empty: the runtime has no preview, or none was seen before the end)",
    )
    first_preview_warmup: float | None = None
    spent: dict[str, float] = Field(
        default_factory=dict,
        description="medians over the measured runs, from each search's timeline: where the "
        "time around the slowest platform went (`spent_on`)",
    )

    @property
    def first_preview_median(self) -> float | None:
        return statistics.median(self.first_preview) if self.first_preview else None


class FirstPreview:
    """An `on_update` callback: when, since `started`, a view first carried a preview with
    results; None until then (or if the search ended without one)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.at: float | None = None

    def __call__(self, view: TaskView) -> None:
        if self.at is None and view.preview is not None and view.preview.results:
            self.at = time.perf_counter() - self.started


def _series(
    runtime: str,
    timings: list[float],
    previews: list[float | None],
    spent: list[dict[str, float]] | None = None,
) -> LatencySeries:
    """The warm-up run apart; preview times only when every measured run saw one (a median of
    some runs would hide the others)."""
    measured = previews[1:]
    seen = [p for p in measured if p is not None]
    return LatencySeries(
        runtime=runtime,
        warmup=timings[0],
        samples=timings[1:],
        first_preview=seen if len(seen) == len(measured) else [],
        first_preview_warmup=previews[0],
        spent=median_spent((spent or [])[1:]),
    )


class LatencyReport(BaseModel):
    delays: list[float]
    runs: int
    poll: float
    series: list[LatencySeries]
    traced: list[LatencySeries] = Field(
        default_factory=list, description="--tracing: the same runtimes, exporting their spans"
    )
    round_trips: dict[str, list[int]] = Field(
        default_factory=dict,
        description="--tracing: per runtime, the store round trips of each platform run from "
        "its delivery to its fan-in committed",
    )
    load: list[float] = Field(
        default_factory=list, description="the 1-minute load average before and after"
    )

    @property
    def limit(self) -> float:
        return max(self.delays)

    def get(self, runtime: str) -> LatencySeries | None:
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
            f"{'x limit':>10}{'x sequential':>14}{'1st preview':>13}",
        ]
        for s in self.series:
            to_limit, to_seq = self.ratios()[s.runtime]
            seq = f"{to_seq:.2f}x" if to_seq is not None else "-"
            first = s.first_preview_median
            preview = f"{first:.3f}s" if first is not None else "-"
            lines.append(
                f"{s.runtime:<11}{s.median:>8.3f}s{min(s.samples):>8.3f}s{max(s.samples):>8.3f}s"
                f"{s.warmup:>9.3f}s{to_limit:>9.2f}x{seq:>14}{preview:>13}"
            )
        lines.append(
            f"physical limit (slowest platform): {self.limit:g} s; "
            f"sum of the delays: {sum(self.delays):g} s; "
            f"first results' limit (quickest platform): {min(self.delays):g} s"
        )
        for s in self.series:
            if s.spent:
                parts = ", ".join(f"{k} {v * 1000:.0f}" for k, v in s.spent.items())
                lines.append(f"{s.runtime} timeline, slowest platform, medians in ms: {parts}")
        targets = (("embedded", EMBEDDED_TARGET), ("emulator", STACK_TARGET), ("aws", STACK_TARGET))
        for runtime, target in targets:
            found = self.get(runtime)
            if found is not None:
                ratio = found.median / self.limit
                verdict = "met" if ratio <= target else "MISSED"
                lines.append(f"target {runtime} <= {target:g}x the limit: {verdict} ({ratio:.2f}x)")
        lines += self._tracing_lines()
        if self.load:
            before, after = self.load[0], self.load[-1]
            quiet = "quiet" if max(self.load) < QUIET_LOAD else f"NOT quiet (>= {QUIET_LOAD:g})"
            lines.append(f"load average (1 min): {before:.2f} before, {after:.2f} after: {quiet}")
        return "\n".join(lines)

    def _tracing_lines(self) -> list[str]:
        lines = []
        if self.traced:
            lines.append("tracing on (OTLP/HTTP to a local receiver) against off, medians:")
        for on in self.traced:
            off = self.get(on.runtime)
            if off is not None:
                lines.append(
                    f"  {on.runtime:<10} off {off.median:.3f}s  on {on.median:.3f}s  "
                    f"overhead {on.median / off.median:.2f}x"
                )
        for runtime, counts in self.round_trips.items():
            if counts:
                lines.append(
                    f"store round trips on a worker's critical path ({runtime}, delivery -> "
                    f"fan-in committed): median {statistics.median(counts):g}, min {min(counts)}, "
                    f"max {max(counts)} over {len(counts)} platform runs"
                )
        return lines


async def measure_embedded(
    platforms: dict[str, ExtraPlatform], runs: int, poll: float, workdir: Path
) -> LatencySeries:
    """Start -> terminal status (and -> first non-empty preview) seen by an in-process poller,
    on the embedded runtime."""
    from fanfuse.runtimes.embedded import EmbeddedRuntime

    settings = Settings(db_path=workdir / "bench.db", extra_platforms=platforms)
    timings: list[float] = []
    previews: list[float | None] = []
    spent: list[dict[str, float]] = []
    async with EmbeddedRuntime(settings) as runtime:
        for _ in range(runs + 1):
            first = FirstPreview()
            accepted = runtime.service.start(bench_payload(list(platforms)))
            view = await runtime.wait(accepted.task_id, on_update=first, poll=poll)
            timings.append(time.perf_counter() - first.started)
            previews.append(first.at)
            spent.append(spent_on(view.timeline, timings[-1]))
            check_completed(view.status.value, "embedded")
    return _series("embedded", timings, previews, spent)


async def measure_sequential(platforms: dict[str, ExtraPlatform], runs: int) -> LatencySeries:
    """The original design: each platform searched after the previous one, then fused."""
    from fanfuse.fusion import fuse as fusion
    from fanfuse.fusion import fusers
    from fanfuse.platforms import Registry
    from fanfuse.platforms.contract import PlatformContext, SearchParams
    from fanfuse.stages.searching import ranked

    registry = Registry(extra=platforms)
    params = SearchParams(queries=["fan-out latency"], limit=RESULTS_PER_PAGE)
    timings: list[float] = []
    for _ in range(runs + 1):
        started = time.perf_counter()
        lists = {}
        for name in platforms:
            platform = registry.get(name)
            ctx = PlatformContext(settings=platform.settings())
            lists[name] = ranked(await platform.search(ctx, params), params.limit)
        fusion.fuse_queries(params.queries, lists, fusers.DEFAULT_FUSION, params.limit)
        timings.append(time.perf_counter() - started)
    return LatencySeries(runtime="sequential", warmup=timings[0], samples=timings[1:])


STACK_RUNTIMES = {"gcp": "emulator", "aws": "aws"}
"""The series name of each local cloud stack."""


def measure_stack(
    platforms: dict[str, ExtraPlatform],
    runs: int,
    poll: float,
    workdir: Path,
    cloud: str = "gcp",
    extra_env: dict[str, str] | None = None,
) -> LatencySeries:
    """POST start_search -> terminal status seen polling `status_url`, on a local cloud stack:
    the GCP one (`emulator`: Firestore and Cloud Tasks emulators, functions), or the AWS one
    (`aws`: moto's DynamoDB and SQS, the Lambda handlers' local process)."""
    from fanfuse.tools.devstack.aws_stack import AwsStack
    from fanfuse.tools.devstack.stack import LocalStack

    env = {"FANFUSE_EXTRA_PLATFORMS": extra_platforms_env(platforms), **(extra_env or {})}
    logs = workdir / "logs" / cloud / ("traced" if extra_env else "plain")
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
) -> LatencySeries:
    """Searches through the HTTP client, on one connection pool (as an app would keep it), as
    the stack's `local` key."""
    from fanfuse.http.client import HttpSearchClient, api_http

    timings: list[float] = []
    previews: list[float | None] = []
    spent: list[dict[str, float]] = []
    async with api_http(30) as http:
        client = HttpSearchClient(url, poll=poll, http=http, api_key=api_key)
        for _ in range(runs + 1):
            first = FirstPreview()
            view = await client.search(payload, on_update=first)
            timings.append(time.perf_counter() - first.started)
            previews.append(first.at)
            spent.append(spent_on(view.timeline, timings[-1]))
            check_completed(view.status.value, runtime)
    return _series(runtime, timings, previews, spent)


def run_latency(
    delays: Sequence[float] = DEFAULT_DELAYS,
    runs: int = DEFAULT_RUNS,
    poll: float = DEFAULT_POLL,
    *,
    stack: bool = True,
    aws: bool = True,
    tracing: bool = False,
) -> LatencyReport:
    """Run the measurements against one stub server; see the module docstring."""
    load = [os.getloadavg()[0]]
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
        traced, trips = (
            measure_traced(platforms, runs, poll, workdir, stack=stack, aws=aws)
            if tracing
            else ([], {})
        )
    load.append(os.getloadavg()[0])
    return LatencyReport(
        delays=list(delays),
        runs=runs,
        poll=poll,
        series=series,
        traced=traced,
        round_trips=trips,
        load=load,
    )


def measure_traced(
    platforms: dict[str, ExtraPlatform],
    runs: int,
    poll: float,
    workdir: Path,
    *,
    stack: bool,
    aws: bool,
) -> tuple[list[LatencySeries], dict[str, list[int]]]:
    """Each runtime again with tracing on, exporting to a local receiver; the round trips on
    each platform run's critical path, from the traces of the measured runs."""
    from fanfuse.tools.otlp import OtlpReceiver
    from fanfuse.tracing import setup

    series: list[LatencySeries] = []
    trips: dict[str, list[int]] = {}
    with OtlpReceiver() as receiver:
        env = {**receiver.env(), "OTEL_SERVICE_NAME": "fanfuse-bench"}
        saved = {name: os.environ.get(name) for name in env}
        os.environ.update(env)  # the exporter reads the process's variables, as deployed
        try:
            setup.configure()
            series.append(asyncio.run(measure_embedded(platforms, runs, poll, workdir)))
        finally:
            setup.shutdown()
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        trips["embedded"] = critical_counts(receiver)
        for cloud, wanted in (("gcp", stack), ("aws", aws)):
            if wanted:
                receiver.clear()
                series.append(measure_stack(platforms, runs, poll, workdir, cloud, env))
                receiver.wait_for(lambda s: False, timeout=1.0)  # the last flushes land
                trips[STACK_RUNTIMES[cloud]] = critical_counts(receiver)
    return series, trips


def critical_counts(receiver: Any) -> list[int]:
    """Per platform run that succeeded, its store round trips from delivery to fan-in."""
    from fanfuse.tools.otlp import critical_path

    spans = list(receiver.spans)
    by_trace: dict[str, list[Any]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    counts = []
    for trace in by_trace.values():
        for run in trace:
            if run.name == "run_platform" and run.attributes.get("fanfuse.outcome") == "succeeded":
                counts.append(len(critical_path(trace, run)))
    return counts
