"""`fanfuse bench hedging`: what a hedge saves when a provider has a slow tail.

One platform run, a fallback chain `primary|fallback`, against stub SearXNG providers on
127.0.0.1: the primary answers in `--base` seconds, but every `--every`-th request (10 % by
default) `--slow` seconds later (3 s in all by default); the fallback answers in `--fallback`
seconds. Two series in one run, on one embedded runtime, each the same number of searches one
after another, each with its own primary double (so each meets exactly the same tail):

- `unhedged`: `hedge_after_s: "off"`, the fallback asked only on a failure (there is none): a
  slow primary is waited out;
- `hedged`: `hedge_after_s: --hedge` (0.5 s): a primary that has not answered by then is
  joined by the fallback, the first answer wins and the other call is cancelled.

Each series has one warm-up search, not counted (the tail is counted from it, so the measured
searches hold exactly one slow primary in `--every`). A time is from the start call to the
terminal status an in-process poller sees (`common.CACHE_POLL` apart); beside it, `in store` is
the task's `finalized_at - created_at`. Reported: p50 and p95 of each series
(rules/stats_figures.py's percentile), the p95 ratio, and what the hedge cost: the provider calls
per search and how many answers were the fallback's.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from fanfuse.rules.health import percentile
from fanfuse.settings import Settings
from fanfuse.tools.bench.common import CACHE_POLL, bench_payload, check_completed
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.instances import ExtraPlatform

SEARCHES = 40
EVERY = 10
BASE_S = 0.2
SLOW_S = 2.8
"""Added to the base: a slow primary answers in 3 s."""
FALLBACK_S = 0.3
HEDGE_S = 0.5
SERIES = (("unhedged", "off"), ("hedged", None))


class HedgeSeries(BaseModel):
    """One series: its measured times, in-store times, calls, and the fallback's answers."""

    series: str
    hedge_after_s: float | str
    samples: list[float]
    in_store: list[float]
    warmup: float
    calls: int
    """Provider calls over the measured searches, cancelled ones included."""
    fallback_answers: int
    """Measured searches whose answer was the fallback's."""

    @property
    def p50(self) -> float:
        return percentile(self.samples, 0.5) or 0.0

    @property
    def p95(self) -> float:
        return percentile(self.samples, 0.95) or 0.0

    @property
    def in_store_p95(self) -> float:
        return percentile(self.in_store, 0.95) or 0.0


class HedgeReport(BaseModel):
    searches: int
    every: int
    base_s: float
    slow_s: float
    fallback_s: float
    hedge_s: float
    poll: float
    series: list[HedgeSeries]

    def get(self, label: str) -> HedgeSeries:
        return next(s for s in self.series if s.series == label)

    @property
    def p95_ratio(self) -> float:
        """Unhedged p95 / hedged p95."""
        return self.get("unhedged").p95 / self.get("hedged").p95

    def render(self) -> str:
        slow = self.base_s + self.slow_s
        lines = [
            f"fanfuse bench hedging: a chain primary|fallback, the primary answering in "
            f"{self.base_s:g} s but 1 request in {self.every} in {slow:g} s, the fallback "
            f"in {self.fallback_s:g} s; embedded runtime, stub providers on 127.0.0.1",
            f"{self.searches} searches a series after one warm-up; poll every {self.poll:g} s",
            f"{'series':<10}{'hedge':>7}{'p50':>9}{'p95':>9}{'max':>9}{'in store p95':>14}"
            f"{'calls/search':>14}{'fallback':>10}",
        ]
        for s in self.series:
            hedge = f"{s.hedge_after_s:g}s" if isinstance(s.hedge_after_s, float) else "off"
            lines.append(
                f"{s.series:<10}{hedge:>7}{s.p50:>8.3f}s{s.p95:>8.3f}s{max(s.samples):>8.3f}s"
                f"{s.in_store_p95:>13.3f}s{s.calls / len(s.samples):>14.2f}"
                f"{s.fallback_answers:>10}"
            )
        lines.append(f"unhedged p95 / hedged p95: {self.p95_ratio:.1f}x")
        return "\n".join(lines)


def doubles(stub: StubSearxServer, primary: str, fallback: str) -> dict[str, ExtraPlatform]:
    """The two providers of one series, by their stub paths (one attempt each: a retry is not
    a hedge)."""
    return {
        name: ExtraPlatform(
            engine="searxng", settings={"base_url": stub.url(path), "max_attempts": 1}
        )
        for name, path in (("primary", primary), ("fallback", fallback))
    }


async def series(
    label: str,
    hedge: float | str,
    stub: StubSearxServer,
    report: HedgeReport,
    workdir: Path,
) -> HedgeSeries:
    from fanfuse.runtimes.embedded import EmbeddedRuntime

    path = f"tail/{report.every}:{report.slow_s:g}/delay/{report.base_s:g}"
    settings = Settings(
        db_path=workdir / f"{label}.db",
        extra_platforms=doubles(stub, path, f"delay/{report.fallback_s:g}"),
        chains={},  # the request spells its chain
    )
    body = {**bench_payload(["primary|fallback"]), "hedge_after_s": hedge}
    timings: list[float] = []
    in_store: list[float] = []
    calls = fallback = 0
    async with EmbeddedRuntime(settings) as runtime:
        for i in range(report.searches + 1):
            started = time.perf_counter()
            accepted = runtime.service.start(body)
            view = await runtime.wait(accepted.task_id, poll=report.poll)
            timings.append(time.perf_counter() - started)
            check_completed(view.status.value, f"hedging {label}")
            if view.finalized_at is not None:
                in_store.append((view.finalized_at - view.created_at).total_seconds())
            if i == 0:
                continue
            [run] = view.platform_runs
            calls += len(run.calls)
            fallback += run.answered_by == ["fallback"]
    return HedgeSeries(
        series=label,
        hedge_after_s=hedge,
        samples=timings[1:],
        in_store=in_store[1:],
        warmup=timings[0],
        calls=calls,
        fallback_answers=fallback,
    )


def run_hedging(
    searches: int = SEARCHES,
    every: int = EVERY,
    *,
    base_s: float = BASE_S,
    slow_s: float = SLOW_S,
    fallback_s: float = FALLBACK_S,
    hedge_s: float = HEDGE_S,
    poll: float = CACHE_POLL,
) -> HedgeReport:
    """Both series, each against a stub server of its own; see the module docstring."""
    report = HedgeReport(
        searches=searches,
        every=every,
        base_s=base_s,
        slow_s=slow_s,
        fallback_s=fallback_s,
        hedge_s=hedge_s,
        poll=poll,
        series=[],
    )
    with tempfile.TemporaryDirectory(prefix="fanfuse-bench-") as tmp:
        for label, hedge in SERIES:
            with StubSearxServer() as stub:
                found = asyncio.run(series(label, hedge or hedge_s, stub, report, Path(tmp)))
            report.series.append(found)
    return report
