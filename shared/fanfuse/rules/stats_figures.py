"""Per-platform figures over recent searches (`fanfuse stats`, `GET /stats`), as pure functions.

The store reads the window's documents (`StatsStore.recent`); everything they mean is decided
here, once, so the SQLite, Firestore and DynamoDB deployments report the same figures, and the
events the service logs for metrics (service/events.py) classify a run exactly as the stats do:

- a run's outcome is its terminal state; a failed run's kind is the one its breaker took
  (`PlatformRun.failure`), or for a document written before runs kept it, what its last
  provider answer says (`kind_for_status`);
- latency is the searching stage's seconds of the runs that asked the provider and succeeded,
  less their cold start, the sample the platform's measured latency takes (health.py): a cache
  hit or a failure says nothing of how fast the provider answers, and a model loading into a
  fresh process (`vectors`' first search: seconds, against milliseconds warm) is reported apart,
  as cold starts;
- a platform contributed a final result when it is among the result's `platforms`, and that
  result is unique to it when it is the only one: which paid platforms earn their cost;
- a fallback chain's run (`google|brave`) is its first member's run, but each call counts for
  the platform that made it (calls, spend, pacing), and its latency is a sample only when the
  run answered itself;
- pacing: the calls that waited for their provider's pace across workers, and how long.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fanfuse.rules import spend
from fanfuse.rules.health import COLD_START, LATENCY_PLACES, percentile, warm_seconds
from fanfuse.rules.spend import usd
from fanfuse.wire.errors import kind_for_status
from fanfuse.wire.models import (
    CacheState,
    CallRecord,
    FailureKind,
    PlatformHealth,
    PlatformRun,
    PlatformState,
    Stage,
    Task,
)
from fanfuse.wire.stats_report import Outcomes, PlatformStats, Stats


@dataclass(frozen=True)
class Recorded:
    """One search as the store kept it: its task document and its platform documents."""

    task: Task
    runs: Sequence[PlatformRun] = field(default_factory=tuple)


def failure_kind(run: PlatformRun) -> FailureKind | None:
    """A failed run's kind (None: the run did not fail)."""
    if run.state is not PlatformState.FAILED:
        return None
    if run.failure is not None:
        return run.failure
    return kind_for_status(run.calls[-1].status if run.calls else None)


def latency_sample(run: PlatformRun) -> float | None:
    """The run's warm searching seconds (less its cold start) when it asked its provider and
    succeeded, else None (and None for a chain that another member answered: its seconds are not
    this platform's)."""
    if run.state is not PlatformState.SUCCEEDED:
        return None
    if run.chain and run.answered_by != [run.name]:
        return None
    if run.cache is not None and run.cache.state is CacheState.HIT:
        return None
    return warm_seconds(run.timings, Stage.SEARCHING.value)


def run_spend(run: PlatformRun) -> float:
    """What the run's calls cost, as its receipt counts them: records and the holds no record
    settled yet (rules/spend.py)."""
    return spend.committed(run)


@dataclass
class _Tally:
    """One platform's running sums while the window's documents are read."""

    runs: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    cold_starts: list[float] = field(default_factory=list)
    hits: int = 0
    misses: int = 0
    results: int = 0
    unique: int = 0
    calls: int = 0
    spend: float = 0.0
    paced: int = 0
    paced_s: float = 0.0

    def add_run(self, run: PlatformRun) -> None:
        self.runs += 1
        state = run.state.value if run.state.terminal else "unfinished"
        self.outcomes[state] = self.outcomes.get(state, 0) + 1
        kind = failure_kind(run)
        if kind is not None:
            self.errors[kind.value] = self.errors.get(kind.value, 0) + 1
        sample = latency_sample(run)
        if sample is not None:
            self.latencies.append(sample)
        cold = run.timings.get(COLD_START)
        if cold is not None:
            self.cold_starts.append(cold)
        if run.cache is not None:
            self.hits += run.cache.hits
            self.misses += run.cache.misses
        self.add_calls(run.calls)

    def add_calls(self, calls: Sequence[CallRecord]) -> None:
        self.calls += len(calls)
        self.spend += usd(sum(call.cost_usd for call in calls))
        self.paced += sum(1 for call in calls if call.paced_s > 0)
        self.paced_s += sum(call.paced_s for call in calls)

    def figures(self, name: str, health: PlatformHealth | None) -> PlatformStats:
        asked = self.hits + self.misses
        return PlatformStats(
            name=name,
            runs=self.runs,
            outcomes=Outcomes.model_validate(self.outcomes),
            errors=dict(sorted(self.errors.items())),
            latency_p50_s=percentile(self.latencies, 0.5),
            latency_p90_s=percentile(self.latencies, 0.9),
            latency_p95_s=percentile(self.latencies, 0.95),
            latency_samples=len(self.latencies),
            cold_starts=len(self.cold_starts),
            cold_start_p50_s=percentile(self.cold_starts, 0.5),
            cache_hits=self.hits,
            cache_misses=self.misses,
            cache_hit_rate=round(self.hits / asked, 4) if asked else None,
            results=self.results,
            unique_results=self.unique,
            provider_calls=self.calls,
            spend_usd=usd(self.spend),
            paced_calls=self.paced,
            paced_s=round(self.paced_s, LATENCY_PLACES),
            breaker=health.state if health is not None else None,
            retry_at=health.retry_at if health is not None else None,
        )


def in_window(task: Task, since: datetime) -> bool:
    return task.created_at >= since


def compute(
    searches: Iterable[Recorded],
    healths: Mapping[str, PlatformHealth],
    *,
    now: datetime,
    window: timedelta,
    scope: str,
    truncated: bool = False,
) -> Stats:
    """The figures of the searches created within `window` before `now` (others are skipped:
    a store may read a little wider), with every platform's breaker from `healths`."""
    since = now - window
    tallies: dict[str, _Tally] = {}
    counted = finished = 0
    oldest: datetime | None = None
    for search in searches:
        task = search.task
        if not in_window(task, since):
            continue
        counted += 1
        oldest = task.created_at if oldest is None else min(oldest, task.created_at)
        for run in search.runs:
            own = [c for c in run.calls if not run.chain or c.platform not in run.chain]
            tallies.setdefault(run.name, _Tally()).add_run(run.model_copy(update={"calls": own}))
            for member in run.chain:  # a chain's calls, each its maker's
                made = [c for c in run.calls if c.platform == member]
                if made:
                    tallies.setdefault(member, _Tally()).add_calls(made)
        if not task.status.terminal:
            continue
        finished += 1
        for result in task.results:
            for name in dict.fromkeys(result.platforms):
                tally = tallies.setdefault(name, _Tally())
                tally.results += 1
                tally.unique += len(set(result.platforms)) == 1
    names = sorted({*tallies, *healths})
    platforms = [tallies.get(n, _Tally()).figures(n, healths.get(n)) for n in names]
    return Stats(
        window_s=window.total_seconds(),
        since=since,
        now=now,
        scope=scope,
        searches=counted,
        finished=finished,
        truncated=truncated,
        oldest=oldest,
        spend_usd=usd(sum(p.spend_usd for p in platforms)),
        platforms=platforms,
    )
