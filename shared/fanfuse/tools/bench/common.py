"""What the benchmarks share: default delays and runs, the measured series, the search they run.

Apart from `latency.py` so that the other benchmarks (cache, load, quota) import this and not
each other: nothing here imports a benchmark.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from fanfuse.tools.stubs import RESULTS_PER_PAGE

DEFAULT_DELAYS = (0.2, 0.5, 1.0)
DEFAULT_RUNS = 5
DEFAULT_POLL = 0.05
CACHE_POLL = 0.01
"""`bench cache` polls more often: a cached search is done in milliseconds (see cache.py)."""


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


def bench_payload(names: Sequence[str]) -> dict[str, Any]:
    """The same search each run, always asking the platforms (a cached answer is another bench:
    `fanfuse bench cache`)."""
    return {
        "query": "fan-out latency",
        "platform": list(names),
        "max_results": RESULTS_PER_PAGE,
        "cache": "bypass",
    }


def check_completed(status: str, runtime: str) -> None:
    if status != "completed":
        raise RuntimeError(f"{runtime}: a benchmark search ended {status}, not completed")
