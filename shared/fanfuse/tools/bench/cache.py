"""`fanfuse bench cache`: what the search cache saves when a search is repeated.

The `bench latency` search (one stub SearXNG platform per delay, 0.2, 0.5 and 1.0 s by default)
on the embedded runtime, two series in one run, on one runtime and one store:

- `uncached`: `cache: bypass`, so every run asks every platform (and refreshes its entries);
- `cached`: then `cache: auto`, so every run is answered from the entries the uncached runs
  stored; it must ask no platform, and the stub's request count is reported to show it did not.

Each series has one warm-up run, reported apart. A time is from the start call to the terminal
status seen by an in-process poller, as in `bench latency`; beside it, `in store` is the task's
`finalized_at - created_at`, which has no poll in it. A cached search is done in milliseconds,
so this bench polls more often than the latency one (`common.CACHE_POLL`): a 0.05 s poll would
mostly measure the poll.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from fanfuse.settings import Settings
from fanfuse.tools.bench.common import (
    CACHE_POLL,
    DEFAULT_DELAYS,
    DEFAULT_RUNS,
    Series,
    bench_payload,
    check_completed,
)
from fanfuse.tools.stubs import StubSearxServer, stub_platforms
from fanfuse.wire.instances import ExtraPlatform
from fanfuse.wire.models import CacheState

CACHE_TTL_SECONDS = 3600.0
"""Set explicitly, so a FANFUSE_CACHE_TTL_SECONDS=0 in the environment cannot turn the cached
series into a second uncached one."""
MODES = (("uncached", "bypass"), ("cached", "auto"))


class CacheSeries(Series):
    """One series' timings, its in-store times, and how many requests reached the platforms."""

    in_store: list[float]
    requests: int
    """Provider requests over the whole series, warm-up included."""

    @property
    def in_store_median(self) -> float:
        return statistics.median(self.in_store)


class CacheReport(BaseModel):
    delays: list[float]
    runs: int
    poll: float
    series: list[CacheSeries]

    def get(self, label: str) -> CacheSeries:
        return next(s for s in self.series if s.runtime == label)

    @property
    def ratio(self) -> float:
        """Median uncached time / median cached time."""
        return self.get("uncached").median / self.get("cached").median

    def render(self) -> str:
        delays = ", ".join(f"{d:g}" for d in self.delays)
        lines = [
            f"fanfuse bench cache: {len(self.delays)} platforms answering after {delays} s, "
            "embedded runtime; the same search uncached (cache: bypass), then cached (cache: auto)",
            f"{self.runs} runs each after one warm-up run; poll every {self.poll:g} s",
            f"{'series':<10}{'median':>9}{'min':>9}{'max':>9}{'warm-up':>10}{'in store':>10}"
            f"{'requests':>10}",
        ]
        for s in self.series:
            lines.append(
                f"{s.runtime:<10}{s.median:>8.3f}s{min(s.samples):>8.3f}s{max(s.samples):>8.3f}s"
                f"{s.warmup:>9.3f}s{s.in_store_median:>9.3f}s{s.requests:>10}"
            )
        lines.append(f"uncached / cached (medians): {self.ratio:.1f}x")
        return "\n".join(lines)


async def measure(
    stub: StubSearxServer,
    platforms: dict[str, ExtraPlatform],
    runs: int,
    poll: float,
    workdir: Path,
) -> list[CacheSeries]:
    """Both series on one embedded runtime: uncached first, which stores what cached reads."""
    from fanfuse.runtimes.embedded import EmbeddedRuntime

    settings = Settings(
        db_path=workdir / "bench.db",
        extra_platforms=platforms,
        cache_ttl_seconds=CACHE_TTL_SECONDS,
    )
    series: list[CacheSeries] = []
    async with EmbeddedRuntime(settings) as runtime:
        for label, mode in MODES:
            payload = {**bench_payload(list(platforms)), "cache": mode}
            before = stub.requests.total()
            timings: list[float] = []
            in_store: list[float] = []
            for _ in range(runs + 1):
                started = time.perf_counter()
                accepted = runtime.service.start(payload)
                view = await runtime.wait(accepted.task_id, poll=poll)
                timings.append(time.perf_counter() - started)
                check_completed(view.status.value, "embedded")
                if mode == "auto" and any(
                    r.cache is None or r.cache.state is not CacheState.HIT
                    for r in view.platform_runs
                ):
                    raise RuntimeError("a cached run was not answered from the cache")
                if view.finalized_at is not None:
                    in_store.append((view.finalized_at - view.created_at).total_seconds())
            series.append(
                CacheSeries(
                    runtime=label,
                    warmup=timings[0],
                    samples=timings[1:],
                    in_store=in_store[1:],
                    requests=stub.requests.total() - before,
                )
            )
    return series


def run_cache(
    delays: Sequence[float] = DEFAULT_DELAYS,
    runs: int = DEFAULT_RUNS,
    poll: float = CACHE_POLL,
) -> CacheReport:
    """Run both series against one stub server; see the module docstring."""
    with (
        StubSearxServer() as stub,
        tempfile.TemporaryDirectory(prefix="fanfuse-bench-") as tmp,
    ):
        platforms = stub_platforms(stub, delays)
        series = asyncio.run(measure(stub, platforms, runs, poll, Path(tmp)))
    return CacheReport(delays=list(delays), runs=runs, poll=poll, series=series)
