"""`fanfuse bench serve`: what a resident server saves over a fresh process per search.

The offline platforms (`docs`: BM25, `vectors`: MiniLM embeddings) over the bundled Vaswani
corpus, searched two ways:

- `warm`: `fanfuse serve --port 0` as a child process, waited for until `ready` (its runtime
  entered, both platforms' indexes and the model loaded), then one `POST /search` per query,
  each a different Vaswani query, with `cache: bypass` so every run searches; one warm-up
  request is reported apart, then the median and p90 of the others;
- `cold`: `fanfuse search QUERY -p "docs, vectors" --json --cache bypass` as a fresh process
  per query (other Vaswani queries): imports, index load, model load and the search, which is
  what a one-shot CLI pays every time; the median.

A time is the client's: the HTTP round trip for `warm`, the process from start to exit for
`cold`. Both use one temporary task database; the index caches are the user's
(`~/.cache/fanfuse`, where `fanfuse index` or the first search built them; the first build takes
minutes). If `vectors` is not available here the bench fails and says why: a bench over `docs`
alone would measure something else.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

from fanfuse.auth.keys import API_KEY_HEADER
from fanfuse.retrieval.corpus import load_trec_queries

PLATFORMS = ("docs", "vectors")
DEFAULT_WARM_RUNS = 20
DEFAULT_COLD_RUNS = 3
READY_TIMEOUT = 900.0
"""Seconds the server may take to be ready: loading the model, or building a missing index."""
REQUEST_TIMEOUT = 300.0


class ServeReport(BaseModel):
    platforms: list[str]
    startup: float
    """Seconds from spawning `fanfuse serve` to its `ready` line (imports, model, indexes)."""
    warmup: float
    warm: list[float]
    cold: list[float]

    @property
    def warm_median(self) -> float:
        return statistics.median(self.warm)

    @property
    def warm_p90(self) -> float:
        return statistics.quantiles(self.warm, n=10, method="inclusive")[-1]

    @property
    def cold_median(self) -> float:
        return statistics.median(self.cold)

    @property
    def ratio(self) -> float:
        """Cold median / warm median."""
        return self.cold_median / self.warm_median

    def render(self) -> str:
        platforms = ", ".join(self.platforms)
        return "\n".join(
            [
                f"fanfuse bench serve: {platforms} over Vaswani, a different query per run, "
                "cache: bypass",
                f"serve start-up to ready: {self.startup:.2f}s; warm-up request {self.warmup:.3f}s",
                f"warm  POST /search x{len(self.warm)}: median {self.warm_median:.3f}s, "
                f"p90 {self.warm_p90:.3f}s, min {min(self.warm):.3f}s, max {max(self.warm):.3f}s",
                f"cold  fanfuse search x{len(self.cold)}: median {self.cold_median:.3f}s, "
                f"min {min(self.cold):.3f}s, max {max(self.cold):.3f}s",
                f"cold / warm (medians): {self.ratio:.1f}x",
            ]
        )


def _payload(query: str) -> dict[str, Any]:
    return {"query": query, "platform": ", ".join(PLATFORMS), "cache": "bypass"}


def _check(view: dict[str, Any], how: str) -> None:
    if view.get("status") != "completed":
        runs = view.get("platform_runs") or []
        errors = [f"{r['name']}: {r['error']}" for r in runs if r.get("error")]
        raise RuntimeError(f"{how}: a search ended {view.get('status')}: {'; '.join(errors)}")


def _unavailable(http: httpx.Client) -> list[str]:
    rows = {row["name"]: row for row in http.get("/platforms").json()}
    return [
        f"{name}: {rows[name]['reason'] if name in rows else 'unknown platform'}"
        for name in PLATFORMS
        if not rows.get(name, {}).get("available")
    ]


def measure_warm(queries: list[str], env: dict[str, str], log_dir: Path) -> tuple[float, ...]:
    """(start-up, warm-up request, then one time per query) against one `fanfuse serve`."""
    from fanfuse.tools.devstack.serve_process import ServeProcess

    started = time.perf_counter()
    warm = ",".join(PLATFORMS)  # a platform that cannot load fails the start, saying why
    with ServeProcess("--warm", warm, env=env, timeout=READY_TIMEOUT, log_dir=log_dir) as server:
        startup = time.perf_counter() - started
        timings = [startup]
        headers = {API_KEY_HEADER: server.api_key}
        with httpx.Client(base_url=server.url, timeout=REQUEST_TIMEOUT, headers=headers) as http:
            missing = _unavailable(http)
            if missing:
                raise RuntimeError(f"cannot bench serve: not available: {'; '.join(missing)}")
            for query in queries:
                began = time.perf_counter()
                answer = http.post("/search", json=_payload(query))
                timings.append(time.perf_counter() - began)
                if answer.status_code != 200:
                    raise RuntimeError(f"POST /search answered {answer.status_code}: {answer.text}")
                _check(answer.json(), "serve")
    return tuple(timings)


def measure_cold(queries: list[str], env: dict[str, str]) -> list[float]:
    """One fresh `fanfuse search` process per query, from spawn to exit."""
    timings = []
    for query in queries:
        argv = [
            sys.executable,
            "-m",
            "fanfuse.cli.main",
            "search",
            query,
            "-p",
            ", ".join(PLATFORMS),
        ]
        began = time.perf_counter()
        done = subprocess.run(
            [*argv, "--json", "--cache", "bypass"],
            env=env,
            capture_output=True,
            text=True,
            timeout=REQUEST_TIMEOUT,
            check=False,
        )
        timings.append(time.perf_counter() - began)
        if done.returncode != 0:
            raise RuntimeError(f"fanfuse search exited {done.returncode}: {done.stderr[-500:]}")
        _check(json.loads(done.stdout), "fanfuse search")
    return timings


def run_serve(
    warm_runs: int = DEFAULT_WARM_RUNS, cold_runs: int = DEFAULT_COLD_RUNS
) -> ServeReport:
    """Both measurements on distinct Vaswani queries; see the module docstring."""
    queries = list(load_trec_queries().values())
    if len(queries) < warm_runs + 1 + cold_runs:
        raise ValueError(f"only {len(queries)} queries for {warm_runs + 1 + cold_runs} runs")
    with tempfile.TemporaryDirectory(prefix="fanfuse-bench-") as tmp:
        env = {**os.environ, "FANFUSE_DB_PATH": str(Path(tmp) / "bench.db")}
        startup, warmup, *warm = measure_warm(queries[: warm_runs + 1], env, Path(tmp) / "logs")
        cold = measure_cold(queries[warm_runs + 1 : warm_runs + 1 + cold_runs], env)
    return ServeReport(
        platforms=list(PLATFORMS), startup=startup, warmup=warmup, warm=warm, cold=cold
    )
