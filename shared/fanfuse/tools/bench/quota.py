"""`fanfuse bench quota`: what the start-rate limiter costs one caller, and where it becomes the
bottleneck.

One caller starting as fast as it can, on SQLite (a temporary file) and on the Firestore emulator
(started here, `fanfuse.tools.devstack.FirestoreEmulator`):

- `take/admitted`: the rate take alone (`admission.take`) at a rate so high that nothing is
  refused (ADMIT_ALL a minute: 20,000 shards), so every take is a read and a write;
- `take/refused`: the default rate's bucket once its burst is spent, at one instant (nothing
  refills), so every take is a read and writes nothing;
- `count/in-flight`: the in-flight count alone, of a caller with the default cap's searches;
- `start/unlimited` and `start/limited`: `SearchService.start` of a one-platform search with
  no caller (no limiter), then with a caller at ADMIT_ALL (the in-flight count, then the take).
  The queue accepts messages and drops them: enqueueing costs the same either way.

Each at 1 thread and at K threads sharing one store (one function instance serving K requests at
once). A figure is the median rate of `runs` runs of `ops` operations, after one warm-up run
(imports, connections); the series take turns run by run, so a drift of the machine touches
them alike. The Firestore emulator is emptied before each run, so the in-flight count of a
`start/limited` run sees at most `ops` searches. The emulator is not Firestore: it answers from
one process, with no network between, and scans instead of using indexes, so its figures compare
the series with each other rather than predict production.

Where the limiter becomes the bottleneck: one caller can start no faster than the limiter admits
(a take and a count, each measured alone), and no faster than a start without the limiter
completes; the smaller of the two is the bottleneck. The limiter's share of a start is given by
its parts' times over a limited start's, and as 1 - (limited rate / unlimited rate), which on a
busy machine is the difference of two noisy medians.

`burst tail` (SQLite, one instant): how much of a sharded caller's burst is admitted before its
first refusal, the cost of trying at most quota.MAX_TRIES shards (see quota.py).
"""

from __future__ import annotations

import os
import random
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from fanfuse.queue.port import AggregateMessage, PlatformMessage, TaskQueue
from fanfuse.rules import quota
from fanfuse.service import admission
from fanfuse.settings import Settings
from fanfuse.store.ports import TaskStore
from fanfuse.tools.bench.common import Samples
from fanfuse.wire.instances import ExtraPlatform
from fanfuse.wire.models import Caller, utcnow

if TYPE_CHECKING:
    from datetime import datetime

ADMIT_ALL = 600_000
"""Starts a minute that nothing in a bench run comes near: every take is admitted."""
DEFAULT_OPS = 200
DEFAULT_THREADS = (1, 4)
TAIL_RATES = (600, 3000)
PLATFORM = "bench_stub"
TAKE_ADMITTED, TAKE_REFUSED, COUNT = "take/admitted", "take/refused", "count/in-flight"
START_FREE, START_LIMITED = "start/unlimited", "start/limited"
SERIES = (TAKE_ADMITTED, TAKE_REFUSED, COUNT, START_FREE, START_LIMITED)


class Rate(Samples):
    """One series: operations a second, one sample per run."""

    store: str
    what: str
    threads: int


class BurstTail(BaseModel):
    """At one instant: starts admitted before the first refusal, per run, of a full burst."""

    per_minute: int
    shards: int
    first_refusal: list[int]


class QuotaReport(BaseModel):
    runs: int
    ops: int
    series: list[Rate]
    tails: list[BurstTail]

    def get(self, store: str, what: str, threads: int) -> Rate | None:
        found = (s for s in self.series if (s.store, s.what, s.threads) == (store, what, threads))
        return next(found, None)

    def stores(self) -> list[str]:
        return list(dict.fromkeys(s.store for s in self.series))

    def verdict(self, store: str, threads: int) -> str | None:
        """Where one caller's starts are bottlenecked on `store` at `threads`, and the limiter's
        share of a start: by its parts' own times (a take and a count, measured alone), which
        a busy machine blurs less than the difference of two start medians (also given)."""
        found = [self.get(store, what, threads) for what in SERIES]
        take, _, count, free, limited = found
        if take is None or count is None or free is None or limited is None:
            return None
        take_ms, count_ms = (threads * 1000 / s.median for s in (take, count))
        ceiling = threads * 1000 / (take_ms + count_ms)
        by_parts = (take_ms + count_ms) / (threads * 1000 / limited.median)
        by_medians = 1 - limited.median / free.median
        neck = "the limiter" if ceiling < free.median else "start_search itself"
        return (
            f"{store}, {threads} threads: the limiter (a take {take_ms:.2f} ms + a count "
            f"{count_ms:.2f} ms) admits up to {ceiling:,.0f} starts/s; start_search "
            f"{free.median:,.1f}/s without it, {limited.median:,.1f}/s with it; the limiter's "
            f"share of a start {by_parts:.1%} by its parts ({by_medians:.1%} by the medians); "
            f"the bottleneck: {neck}"
        )

    def render(self) -> str:
        lines = [
            f"fanfuse bench quota: one caller as fast as it can; medians of {self.runs} runs of "
            f"{self.ops} operations each, after one warm-up run",
            f"{'store':<11}{'series':<17}{'threads':>8}{'median/s':>11}{'min/s':>10}{'max/s':>10}",
        ]
        for s in self.series:
            lines.append(
                f"{s.store:<11}{s.what:<17}{s.threads:>8}{s.median:>11,.1f}"
                f"{min(s.samples):>10,.1f}{max(s.samples):>10,.1f}"
            )
        for store in self.stores():
            for threads in sorted({s.threads for s in self.series if s.store == store}):
                verdict = self.verdict(store, threads)
                lines.extend([verdict] if verdict else [])
        for tail in self.tails:
            seen = ", ".join(str(n) for n in tail.first_refusal)
            lines.append(
                f"burst tail: {tail.per_minute}/min in {tail.shards} shards, trying at most "
                f"{quota.MAX_TRIES}: first refusal after {seen} of {tail.per_minute} starts"
            )
        return "\n".join(lines)


class DiscardQueue(TaskQueue):
    """Accepts every message and runs nothing: the bench measures start, not the searches."""

    def enqueue_platform(self, message: PlatformMessage) -> None:
        return None

    def enqueue_aggregate(self, message: AggregateMessage, at: datetime | None = None) -> None:
        return None


def ops_per_second(op: Callable[[], object], ops: int, threads: int) -> float:
    """`ops` calls of `op`, split over `threads` threads started together: calls a second."""
    each = [ops // threads + (i < ops % threads) for i in range(threads)]

    def work(n: int) -> None:
        for _ in range(n):
            op()

    with ThreadPoolExecutor(threads) as pool:
        started = time.perf_counter()
        list(pool.map(work, each))
        return ops / (time.perf_counter() - started)


def measure_store(
    name: str,
    fresh: Callable[[], TaskStore],
    runs: int,
    ops: int,
    thread_counts: Sequence[int],
) -> list[Rate]:
    """The four series on one kind of store; `fresh()` gives an empty store for each run."""
    from fanfuse.platforms import Registry
    from fanfuse.service.service import SearchService

    stub = ExtraPlatform(engine="searxng", settings={"base_url": "http://127.0.0.1:9"})
    settings = Settings(extra_platforms={PLATFORM: stub})
    registry = Registry(extra=settings.extra_platforms)
    payload = {"query": "quota bench", "platform": PLATFORM}
    everyone = quota.Limit.per_minute(ADMIT_ALL)
    default = quota.Limit.per_minute(settings.rate_per_minute)

    def one_run(what: str, threads: int) -> float:
        store = fresh()
        subject = uuid.uuid4().hex
        rng = random.Random()
        instant = utcnow()
        service = SearchService(store, DiscardQueue(), registry, settings)
        caller = Caller(
            subject=subject, via="api_key", rate_per_minute=ADMIT_ALL, max_in_flight=ops + 1
        )
        ops_for: dict[str, Callable[[], object]] = {
            TAKE_ADMITTED: lambda: admission.take(store, subject, everyone, utcnow(), rng),
            TAKE_REFUSED: lambda: admission.take(store, subject, default, instant, rng),
            COUNT: lambda: store.count_in_flight(subject, utcnow()),
            START_FREE: lambda: service.start(payload),
            START_LIMITED: lambda: service.start(payload, caller=caller),
        }
        if what == TAKE_REFUSED:
            while admission.take(store, subject, default, instant, rng) is None:
                pass  # spend the burst: at most `default.burst` takes
        if what == COUNT:
            for _ in range(settings.max_in_flight):  # a caller at the default cap
                service.start(payload, caller=caller)
        try:
            return ops_per_second(ops_for[what], ops, threads)
        finally:
            store.close()

    rates = []
    for threads in thread_counts:
        samples: dict[str, list[float]] = {what: [] for what in SERIES}
        for _ in range(runs + 1):
            for what in SERIES:
                samples[what].append(one_run(what, threads))
        rates += [
            Rate(store=name, what=what, threads=threads, samples=samples[what][1:])
            for what in SERIES
        ]
    return rates


def burst_tails(runs: int) -> list[BurstTail]:
    """Starts admitted at one instant before the first refusal, for the sharded TAIL_RATES."""
    from fanfuse.store.sqlite import SqliteStore

    tails = []
    instant = utcnow()
    for per_minute in TAIL_RATES:
        limit = quota.Limit.per_minute(per_minute)
        firsts = []
        for seed in range(runs):
            store, rng, admitted = SqliteStore(":memory:"), random.Random(seed), 0
            while admitted < per_minute and admission.take(store, "c", limit, instant, rng) is None:
                admitted += 1
            store.close()
            firsts.append(admitted)
        tails.append(BurstTail(per_minute=per_minute, shards=limit.shards(), first_refusal=firsts))
    return tails


@contextmanager
def emulator_stores(workdir: Path) -> Iterator[Callable[[], TaskStore]]:
    """A Firestore emulator for the bench, and a factory of stores on it (each emptied first)."""
    from google.cloud import firestore

    from fanfuse.store.firestore import FirestoreStore
    from fanfuse.tools.devstack.firestore_emulator import FirestoreEmulator

    with FirestoreEmulator(log_dir=workdir / "logs") as emulator:

        def fresh() -> TaskStore:
            emulator.reset()
            with _environ("FIRESTORE_EMULATOR_HOST", emulator.host):  # read when built
                return FirestoreStore(firestore.Client(project=emulator.project))

        yield fresh


@contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous


def run_quota(
    runs: int = 5,
    ops: int = DEFAULT_OPS,
    thread_counts: Sequence[int] = DEFAULT_THREADS,
    *,
    firestore: bool = True,
) -> QuotaReport:
    """Measure every series on SQLite, then (with `firestore`) on the emulator."""
    from fanfuse.store.sqlite import SqliteStore

    with tempfile.TemporaryDirectory(prefix="fanfuse-bench-") as tmp:
        workdir = Path(tmp)

        def sqlite() -> TaskStore:
            return SqliteStore(workdir / f"{uuid.uuid4().hex}.db")

        series = measure_store("sqlite", sqlite, runs, ops, thread_counts)
        if firestore:
            with emulator_stores(workdir) as fresh:
                series += measure_store("firestore", fresh, runs, ops, thread_counts)
    return QuotaReport(runs=runs, ops=ops, series=series, tails=burst_tails(runs))
