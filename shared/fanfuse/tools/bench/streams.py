"""`fanfuse bench streams`: what many event streams on one running search cost `fanfuse serve`.

Issue 29's probe: one caller opens 150 `GET /search_status/{id}/events` streams on its own
running 5-query search, and another caller asks for `/openapi.json` meanwhile. Each stream used
to re-read and merge the whole search every 100 ms on the event loop (1,500 merges a second):
the document took seconds to answer. Measured here, against a real `fanfuse serve` child on
127.0.0.1 over stub SearXNG platforms (`fanfuse.tools.stubs`):

- the search: 5 queries on two platforms that answer at once (results to merge) and one held at
  the stub's gate until the end, so it runs for the whole measurement;
- `streams` streams of one key, opened together; the window starts once every one of them has
  received its first event (each is then open and being served: no sleep guesses that);
- over `seconds`, `/openapi.json` from another client (no key: the document is public), one
  request after another with a short pause, each timed; and serve's CPU time over the same
  window, from `/proc/<pid>/stat` (user + system, every thread of the process);
- then one stream more of the same key: its status (429 past the cap, with `Retry-After`).

Linux only (`/proc`). Every wait is bounded; the server and the stub stop at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import BaseModel

from fanfuse.auth.keys import API_KEY_HEADER

DEFAULT_STREAMS = 150
DEFAULT_SECONDS = 10.0
QUERIES = ["plasma", "laser", "waveguide", "dielectric", "ionosphere"]
OPEN_TIMEOUT = 180.0
"""Seconds every stream may take to get its first event (a loaded machine, the old code)."""
PAUSE = 0.1
"""Seconds between two `/openapi.json` requests of the window."""
CLOSE_TIMEOUT = 30.0
"""Seconds serve may take to notice that every stream was closed."""
GAUGES = ("fanfuse_event_streams", "fanfuse_search_watchers")


class StreamsReport(BaseModel):
    streams: int
    seconds: float
    openapi_alone: list[float]
    """`/openapi.json` before any stream was opened (seconds each)."""
    openapi_loaded: list[float]
    """`/openapi.json` while the streams are open (seconds each)."""
    cpu_seconds: float
    """serve's user + system CPU time over the window."""
    window: float
    """The window's wall time (seconds): `seconds`, plus the last request's tail."""
    opened_in: float
    """Seconds until every stream had its first event."""
    next_status: int
    """The status of one stream more of the same caller."""
    retry_after: str | None
    released_in: float | None
    """Seconds from closing every stream until serve's metrics said no stream was open and no
    search watched (None: its metrics do not say, or never did within CLOSE_TIMEOUT)."""
    reopened_status: int
    """The status of a stream of the same caller opened after that."""

    @property
    def alone_median(self) -> float:
        return statistics.median(self.openapi_alone)

    @property
    def loaded_median(self) -> float:
        return statistics.median(self.openapi_loaded)

    def render(self) -> str:
        loaded = self.openapi_loaded
        return "\n".join(
            [
                f"fanfuse bench streams: {self.streams} event streams of one key on one running "
                f"5-query search, a {self.seconds:.0f} s window",
                f"streams open (each had its first event) after {self.opened_in:.1f} s",
                f"/openapi.json from another caller: alone median {self.alone_median * 1000:.1f}"
                f" ms; with the streams median {self.loaded_median * 1000:.1f} ms, max "
                f"{max(loaded) * 1000:.1f} ms ({len(loaded)} requests)",
                f"serve CPU over the window: {self.cpu_seconds:.2f} s in {self.window:.1f} s",
                f"stream {self.streams + 1} of the same key: {self.next_status}"
                + (f" (Retry-After: {self.retry_after})" if self.retry_after else ""),
                "all closed: "
                + (
                    f"no stream open and no search watched after {self.released_in:.2f} s"
                    if self.released_in is not None
                    else "serve's metrics do not count streams"
                )
                + f"; a new stream of the same key then: {self.reopened_status}",
            ]
        )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far (every thread), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


@dataclass
class Stream:
    """One open event stream: its status, and whether its first event came."""

    status: int = 0
    retry_after: str | None = None
    first: asyncio.Event | None = None


async def hold_stream(client: httpx.AsyncClient, url: str, stream: Stream) -> None:
    """Open `url` as an event stream and read it until cancelled (or the server ends it)."""
    first = stream.first = stream.first or asyncio.Event()
    async with client.stream("GET", url) as answer:
        stream.status = answer.status_code
        stream.retry_after = answer.headers.get("retry-after")
        if answer.status_code != 200:
            await answer.aread()
            first.set()
            return
        async for line in answer.aiter_lines():
            if line.startswith("data:"):
                first.set()


async def timed_get(client: httpx.AsyncClient, path: str) -> float:
    began = time.perf_counter()
    answer = await client.get(path)
    elapsed = time.perf_counter() - began
    if answer.status_code != 200:
        raise RuntimeError(f"GET {path} answered {answer.status_code}")
    return elapsed


async def measure(
    url: str, key: str, task_id: str, pid: int, streams: int, seconds: float
) -> StreamsReport:
    """The figures against a running server at `url` (process `pid`), `task_id` running."""
    events = f"/search_status/{task_id}/events"
    limits = httpx.Limits(max_connections=streams + 8, max_keepalive_connections=streams + 8)
    timeout = httpx.Timeout(60.0, read=None)
    async with (
        httpx.AsyncClient(base_url=url, timeout=30.0) as other,
        httpx.AsyncClient(
            base_url=url, headers={API_KEY_HEADER: key}, limits=limits, timeout=timeout
        ) as mine,
    ):
        await timed_get(other, "/openapi.json")  # a connection open, the document rendered
        alone = [await timed_get(other, "/openapi.json") for _ in range(9)]
        held = [Stream(first=asyncio.Event()) for _ in range(streams)]
        began = time.perf_counter()
        tasks = [asyncio.create_task(hold_stream(mine, events, s)) for s in held]
        try:
            async with asyncio.timeout(OPEN_TIMEOUT):
                await asyncio.gather(*(s.first.wait() for s in held if s.first))
            opened_in = time.perf_counter() - began
            refused = [s.status for s in held if s.status != 200]
            if refused:
                raise RuntimeError(f"{len(refused)} of {streams} streams refused: {refused[:5]}")
            cpu_before, start = cpu_seconds(pid), time.perf_counter()
            loaded = []
            while time.perf_counter() - start < seconds:
                loaded.append(await timed_get(other, "/openapi.json"))
                await asyncio.sleep(PAUSE)
            window = time.perf_counter() - start
            cpu = cpu_seconds(pid) - cpu_before
            one_more = Stream(first=asyncio.Event())
            extra = asyncio.create_task(hold_stream(mine, events, one_more))
            tasks.append(extra)
            async with asyncio.timeout(OPEN_TIMEOUT):
                await one_more.first.wait()  # type: ignore[union-attr]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        released_in = await released(mine)
        again = Stream(first=asyncio.Event())
        reopened = asyncio.create_task(hold_stream(mine, events, again))
        try:
            async with asyncio.timeout(OPEN_TIMEOUT):
                await again.first.wait()  # type: ignore[union-attr]
        finally:
            reopened.cancel()
            await asyncio.gather(reopened, return_exceptions=True)
    return StreamsReport(
        streams=streams,
        seconds=seconds,
        openapi_alone=alone,
        openapi_loaded=loaded,
        cpu_seconds=cpu,
        window=window,
        opened_in=opened_in,
        next_status=one_more.status,
        retry_after=one_more.retry_after,
        released_in=released_in,
        reopened_status=again.status,
    )


def gauges(text: str) -> dict[str, float]:
    """The samples of `GAUGES` in a Prometheus text answer."""
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in GAUGES:
            found[name] = float(value)
    return found


async def released(client: httpx.AsyncClient) -> float | None:
    """Seconds until serve's `/metrics` (the operator's: the printed key) counts no open stream
    and no watched search, read again each time it still counts some; None when its metrics
    have no such gauges (a server before them) or still count some after CLOSE_TIMEOUT."""
    began = time.perf_counter()
    while time.perf_counter() - began < CLOSE_TIMEOUT:
        answer = await client.get("/metrics")
        found = gauges(answer.text) if answer.status_code == 200 else {}
        if set(found) != set(GAUGES):
            return None
        if not any(found.values()):
            return time.perf_counter() - began
        await asyncio.sleep(PAUSE)
    return None


@contextmanager
def running_search(env: dict[str, str], log_dir: Path) -> Iterator[tuple[str, str, str, int]]:
    """`fanfuse serve` over stub platforms with one 5-query search running (held at a gate):
    (url, its key, the task id, serve's pid); the gate is opened and both stop at the end."""
    from fanfuse.tools.devstack.serve_process import ServeProcess
    from fanfuse.tools.stubs import StubSearxServer

    with StubSearxServer() as stub:
        platforms = {
            name: {"engine": "searxng", "settings": {"base_url": stub.url(path), "timeout": 120}}
            for name, path in (("web_a", "delay/0"), ("web_b", "delay/0"), ("held", "gate/b"))
        }
        env = {
            **env,
            "FANFUSE_EXTRA_PLATFORMS": json.dumps(platforms),
            "FANFUSE_DEADLINE_SECONDS": "300",
            "FANFUSE_PROGRESS_INTERVAL": "0",
        }
        try:
            with ServeProcess("--warm", "none", env=env, log_dir=log_dir) as server:
                body = {"query": QUERIES, "platform": "web_a, web_b, held", "cache": "bypass"}
                started = httpx.post(
                    f"{server.url}/start_search",
                    json=body,
                    headers={API_KEY_HEADER: server.api_key},
                    timeout=30,
                )
                if started.status_code != 202:
                    raise RuntimeError(f"start_search answered {started.status_code}")
                task_id = started.json()["task_id"]
                yield server.url, server.api_key, task_id, server.process.pid
        finally:
            stub.release("b")


def run_streams(
    streams: int = DEFAULT_STREAMS,
    seconds: float = DEFAULT_SECONDS,
    cap: int | None = None,
    server_code: Path | None = None,
) -> StreamsReport:
    """The figures on a fresh server (`cap`: its FANFUSE_MAX_STREAMS_PER_CALLER; None: the
    number of streams, so that all of them open and one more is the first past the cap).
    `server_code`: a `shared/` folder the server imports fanfuse from instead (another commit's
    tree, for a figure before a change)."""
    with tempfile.TemporaryDirectory(prefix="fanfuse-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
        if server_code is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(server_code), env.get("PYTHONPATH")])
            )
        env |= {
            "FANFUSE_DB_PATH": str(Path(tmp) / "bench.db"),
            "FANFUSE_CACHE_DIR": str(Path(tmp) / "cache"),
            "FANFUSE_MAX_STREAMS_PER_CALLER": str(cap if cap is not None else streams),
        }
        with running_search(env, Path(tmp)) as (url, key, task_id, pid):
            return asyncio.run(measure(url, key, task_id, pid, streams, seconds))
