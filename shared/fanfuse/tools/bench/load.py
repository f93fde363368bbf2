"""`fanfuse bench load`: many searches at once, and what each runtime sustains.

C concurrent clients each start a search, await its end, and start the next, until N searches
have been started. Every search fans out to the stub platforms (`fanfuse.tools.stubs`'s local
SearXNG double on 127.0.0.1, answering after a realistic delay), so the figure is the runtime's
own overhead under load: its store, its queue, its workers, its polling.

- `embedded`: one embedded runtime (SQLite, in-process queue), polled in process. Before each
  platform's calls in flight derived from its provider's rate limit (net/policy.py), every
  platform was capped at 4, which bounded it to 4 searches/s with the slowest stub at 1 s;
- `serve`: `fanfuse serve` as a child process (the embedded runtime behind HTTP, as a resident
  server runs it), each client sending `POST /search` (start and wait: the server answers once
  the search is final) as a key of the bench's own; the client's round trip is the latency.
  The stub platforms are declared with `max_concurrency` = C: a local stub has no rate limit,
  so the runtime, not a provider's limit, bounds the figure;
- `emulator`: the local cloud stack, driven over HTTP (one connection pool, as an app keeps it,
  which closes idle connections before the functions' server does: client.KEEPALIVE_EXPIRY).
  Its queues dispatch as Cloud Tasks does, up to 20 tasks in flight per queue
  (`devstack/tasks_dispatch.py`; the emulator's own dispatcher ran one at a time per queue and
  held it to about 0.9 searches/s), so what bounds it is the machine: one functions-framework
  process per function (8 threads on 2 cores), the Firestore emulator's JVM, and the clients'
  status polls, every 50 ms each;
- `aws`: the local AWS stack (moto's DynamoDB and SQS in one process, the Lambda handlers' local
  process, 5 invocations at a time per queue as infra/aws's mappings allow), driven the same
  way. moto bounds it: one Python process whose in-memory DynamoDB grows with every search.
  The stacks' own `local` key has the deployment's default quotas (a few starts a minute, a few
  searches in flight), which would measure the quota, not the runtime; the bench stores a key of
  its own with limits far above N and C, and says so in its report.

A search's latency is the client's: from the moment its start was accepted to the moment a
poller sees it terminal. Each search has a time limit; a search that fails to start, ends in
an error or outlives its limit counts as an error, and the run goes on (a load test that stops
at the first failure says nothing about the rest). Throughput: terminal searches per second
of wall-clock time, from the first start to the last end. What the stubs allow: C clients
waiting at least the slowest stub's delay per search, C / max(delays) searches a second; each
runtime's figure is also given as a share of that.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from fanfuse.settings import Settings
from fanfuse.tools.bench.common import DEFAULT_DELAYS, bench_payload
from fanfuse.tools.stubs import StubSearxServer, extra_platforms_env, stub_platforms
from fanfuse.wire.instances import ExtraPlatform
from fanfuse.wire.models import TaskStatus

DEFAULT_SEARCHES = 200
DEFAULT_CONCURRENCY = 16
DEFAULT_TIMEOUT = 60.0
"""Seconds one search may take from its start to its terminal status before it is an error."""
LOAD_POLL = 0.05
REASON_CHARS = 200
BENCH_KEY_RATE = 1_000_000
"""The bench key's starts a minute and searches in flight: far above any N and C it runs."""
BENCH_KEY_IN_FLIGHT = 100_000


class Percentiles(BaseModel):
    p50: float | None
    p95: float | None
    p99: float | None


class LoadResult(BaseModel):
    """One runtime's run: how many searches, how they ended, how fast and how long."""

    runtime: str
    searches: int
    terminal: int
    """Searches seen in a terminal status (completed, failed, cancelled...) within the limit."""
    completed: int
    errors: int
    """Searches that could not start, ended other than completed, or outlived the limit."""
    throughput_per_s: float
    latency_s: Percentiles
    error_reasons: dict[str, int] = Field(default_factory=dict, exclude=True)
    """Why, and how often (in the text report and on stderr; not a field of the JSON)."""


class LoadReport(BaseModel):
    delays: list[float]
    concurrency: int
    note: str
    results: list[LoadResult]

    @property
    def allowed_per_s(self) -> float:
        """What the stubs allow: C clients, each search at least the slowest stub's delay."""
        slowest = max(self.delays)
        return self.concurrency / slowest if slowest > 0 else float("inf")

    def render(self) -> str:
        delays = ", ".join(f"{d:g}" for d in self.delays)
        lines = [
            f"fanfuse bench load: {len(self.delays)} stub platforms answering after {delays} s; "
            f"{self.concurrency} concurrent clients",
            self.note,
            f"the stubs allow {self.allowed_per_s:.2f} searches/s "
            f"({self.concurrency} clients / {max(self.delays):g} s)",
            f"{'runtime':<10}{'searches':>9}{'terminal':>9}{'completed':>10}{'errors':>7}"
            f"{'per s':>8}{'of max':>8}{'p50':>8}{'p95':>8}{'p99':>8}",
        ]
        for r in self.results:
            cells = [r.latency_s.p50, r.latency_s.p95, r.latency_s.p99]
            latency = "".join(f"{c:>7.3f}s" if c is not None else f"{'-':>8}" for c in cells)
            share = r.throughput_per_s / self.allowed_per_s if self.allowed_per_s else 0.0
            lines.append(
                f"{r.runtime:<10}{r.searches:>9}{r.terminal:>9}{r.completed:>10}{r.errors:>7}"
                f"{r.throughput_per_s:>8.2f}{share:>8.0%}{latency}"
            )
        for r in self.results:
            lines.extend(f"{r.runtime} error x{n}: {why}" for why, n in r.error_reasons.items())
        return "\n".join(lines)


def percentiles(samples: Sequence[float]) -> Percentiles:
    """p50/p95/p99 by inclusive interpolation; None without samples (all searches failed), and
    the one sample itself when there is only one (`quantiles` needs two)."""
    if not samples:
        return Percentiles(p50=None, p95=None, p99=None)
    if len(samples) == 1:
        return Percentiles(p50=samples[0], p95=samples[0], p99=samples[0])
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return Percentiles(p50=cuts[49], p95=cuts[94], p99=cuts[98])


class Outcome(BaseModel):
    """One search as its client saw it: its final status (None: none seen) and its latency."""

    status: str | None
    latency: float | None
    error: str | None = None


OneSearch = Callable[[], Awaitable[Outcome]]


async def drive(runtime: str, searches: int, concurrency: int, one: OneSearch) -> LoadResult:
    """`concurrency` clients run `one` back to back until `searches` have been started.

    A client takes the next number from a shared counter, so the total is exact however the
    searches' durations differ; an exception from `one` is an error for that search only.
    """
    counter = iter(range(searches))
    outcomes: list[Outcome] = []

    async def client() -> None:
        for _ in counter:
            try:
                outcomes.append(await one())
            except Exception as exc:  # counted, not raised: see the module docstring
                reason = f"{type(exc).__name__}: {exc}"[:REASON_CHARS]
                outcomes.append(Outcome(status=None, latency=None, error=reason))

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return summarize(runtime, outcomes, elapsed)


def summarize(runtime: str, outcomes: Sequence[Outcome], elapsed: float) -> LoadResult:
    """The counts and percentiles of one run's outcomes."""
    terminal = [o for o in outcomes if o.status is not None]
    completed_status = TaskStatus.COMPLETED.value
    completed = [o for o in terminal if o.status == completed_status]
    return LoadResult(
        runtime=runtime,
        searches=len(outcomes),
        terminal=len(terminal),
        completed=len(completed),
        errors=len(outcomes) - len(completed),
        throughput_per_s=len(terminal) / elapsed if elapsed > 0 else 0.0,
        latency_s=percentiles([o.latency for o in terminal if o.latency is not None]),
        error_reasons=Counter(
            o.error or f"ended {o.status}" for o in outcomes if o.status != completed_status
        ),
    )


async def load_embedded(
    platforms: dict[str, ExtraPlatform], searches: int, concurrency: int, limit: float, db: Path
) -> LoadResult:
    from fanfuse.runtimes.embedded import EmbeddedRuntime

    payload = bench_payload(list(platforms))
    async with EmbeddedRuntime(Settings(db_path=db, extra_platforms=platforms)) as runtime:

        async def one() -> Outcome:
            accepted = runtime.service.start(payload)
            began = time.perf_counter()
            view = await asyncio.wait_for(
                runtime.wait(accepted.task_id, poll=LOAD_POLL), timeout=limit
            )
            return Outcome(status=view.status.value, latency=time.perf_counter() - began)

        return await drive("embedded", searches, concurrency, one)


async def load_http(
    url: str,
    api_key: str,
    searches: int,
    concurrency: int,
    limit: float,
    payload: dict[str, object],
    runtime: str = "emulator",
) -> LoadResult:
    from fanfuse.http.client import HttpSearchClient, api_http

    async with api_http(limit, max_connections=concurrency * 2) as http:
        client = HttpSearchClient(url, poll=LOAD_POLL, http=http, api_key=api_key)

        async def one() -> Outcome:
            accepted = await client.start(dict(payload))
            began = time.perf_counter()
            view = await asyncio.wait_for(client.wait(accepted), timeout=limit)
            return Outcome(status=view.status.value, latency=time.perf_counter() - began)

        return await drive(runtime, searches, concurrency, one)


async def post_searches(
    url: str,
    api_key: str,
    searches: int,
    concurrency: int,
    limit: float,
    payload: dict[str, object],
) -> LoadResult:
    """`concurrency` clients, each sending `POST /search` back to back (one pool, as an app)."""
    import httpx

    from fanfuse.auth.keys import API_KEY_HEADER

    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency)
    headers = {API_KEY_HEADER: api_key}
    async with httpx.AsyncClient(
        base_url=url, headers=headers, timeout=limit, limits=limits
    ) as http:

        async def one() -> Outcome:
            began = time.perf_counter()
            answer = await http.post("/search", json=payload)
            latency = time.perf_counter() - began
            if answer.status_code not in (200, 202):
                return Outcome(status=None, latency=None, error=f"HTTP {answer.status_code}")
            return Outcome(status=str(answer.json()["status"]), latency=latency)

        return await drive("serve", searches, concurrency, one)


def load_serve(
    platforms: dict[str, ExtraPlatform],
    searches: int,
    concurrency: int,
    timeout: float,
    workdir: Path,
) -> LoadResult:
    """The same load as `POST /search` calls to `fanfuse serve`, as the bench's own key."""
    from fanfuse.auth import keys
    from fanfuse.store.sqlite import SqliteStore
    from fanfuse.tools.devstack.serve_process import ServeProcess
    from fanfuse.wire.models import utcnow

    db = workdir / "serve.db"
    plaintext, record = keys.new_key(
        "bench", "bench load", BENCH_KEY_RATE, BENCH_KEY_IN_FLIGHT, utcnow()
    )
    store = SqliteStore(db)
    try:
        store.put_key(record)
    finally:
        store.close()
    env = {
        **os.environ,
        "FANFUSE_DB_PATH": str(db),
        "FANFUSE_EXTRA_PLATFORMS": extra_platforms_env(platforms),
    }
    with ServeProcess("--warm", "none", env=env, log_dir=workdir / "logs") as server:
        payload = bench_payload(list(platforms))
        return asyncio.run(
            post_searches(server.url, plaintext, searches, concurrency, timeout, payload)
        )


def load_stack(
    platforms: dict[str, ExtraPlatform],
    searches: int,
    concurrency: int,
    timeout: float,
    workdir: Path,
    cloud: str = "gcp",
) -> LoadResult:
    """The same load over HTTP against a local cloud stack, as the bench's own key: the GCP one
    (`emulator`) or the AWS one (`aws`: moto, the Lambda handlers' local process)."""
    from fanfuse.auth import keys
    from fanfuse.wire.models import utcnow

    env = {"FANFUSE_EXTRA_PLATFORMS": extra_platforms_env(platforms)}
    logs = workdir / "logs" / cloud
    plaintext, record = keys.new_key(
        "bench", "bench load", BENCH_KEY_RATE, BENCH_KEY_IN_FLIGHT, utcnow()
    )
    payload = bench_payload(list(platforms))

    def run(url: str, runtime: str) -> LoadResult:
        return asyncio.run(
            load_http(url, plaintext, searches, concurrency, timeout, payload, runtime)
        )

    if cloud == "aws":
        from fanfuse.net.aws_clients import dynamodb_client
        from fanfuse.store.dynamodb import DynamoStore
        from fanfuse.tools.devstack.aws_stack import AwsStack

        aws = AwsStack(list(platforms), extra_env=env, log_dir=logs)
        with aws as endpoints:
            settings = aws.settings
            DynamoStore(dynamodb_client(settings), settings.dynamodb_table).put_key(record)
            return run(endpoints.functions["start_search"], "aws")

    from fanfuse.store.firestore import FirestoreStore
    from fanfuse.tools.devstack.stack import LocalStack

    stack = LocalStack(list(platforms), extra_env=env, log_dir=logs)
    with stack as addresses:
        firestore = FirestoreStore(stack.firestore.client(), collection=stack.collection)
        try:
            firestore.put_key(record)
        finally:
            firestore.close()
        return run(addresses.functions["start_search"], "emulator")


def run_load(
    searches: int = DEFAULT_SEARCHES,
    concurrency: int = DEFAULT_CONCURRENCY,
    delays: Sequence[float] = DEFAULT_DELAYS,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    stack: bool = True,
    aws: bool = True,
    serve: bool = True,
    embedded: bool = True,
) -> LoadReport:
    """The runtimes asked for against one stub server; see the module docstring."""
    with (
        StubSearxServer() as stub,
        tempfile.TemporaryDirectory(prefix="fanfuse-bench-") as tmp,
    ):
        workdir = Path(tmp)
        platforms = stub_platforms(stub, delays, max_concurrency=concurrency)
        results = []
        if embedded:
            results.append(
                asyncio.run(
                    load_embedded(platforms, searches, concurrency, timeout, workdir / "load.db")
                )
            )
        if serve:
            results.append(load_serve(platforms, searches, concurrency, timeout, workdir))
        for cloud, wanted in (("gcp", stack), ("aws", aws)):
            if wanted:
                results.append(
                    load_stack(platforms, searches, concurrency, timeout, workdir, cloud)
                )
    note = (
        f"serve, emulator, aws: as a key of the bench's own ({BENCH_KEY_RATE} starts/min, "
        f"{BENCH_KEY_IN_FLIGHT} in flight), not the default-quota key; stub platforms allow "
        f"{concurrency} calls in flight each"
    )
    return LoadReport(delays=list(delays), concurrency=concurrency, note=note, results=results)
