"""The service's events, one JSON log line each: what the metrics count.

A platform run that ended (its fan-in, or the deadline, or a cancel ending it), a search that
ended (finalized or cancelled) and a breaker that changed state are each logged once, by the
call whose write made the change (so a redelivery logs nothing twice), with their figures as
fields of the line (`EVENT_FIELD`: support/logs.py writes them into the JSON). Two readers:

- on Google Cloud, log-based metrics (infra/monitoring.tf) count and measure these lines:
  Cloud Logging keeps every instance's, and no process has to be scraped;
- `fanfuse serve` turns them into Prometheus metrics (`GET /metrics`, fronts/serve/metrics.py)
  with a logging handler that keeps the lines of its own service (`SOURCE_FIELD`).

The figures are classified by rules/stats_figures.py, as `GET /stats` classifies the stored
documents, so the metrics and the stats agree on what a failure, a latency sample or a cache hit is.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import Any

from fanfuse.rules import stats_figures
from fanfuse.support.logs import EVENT_FIELD
from fanfuse.wire.models import PlatformHealth, PlatformRun, Task

LOGGER = "fanfuse.events"
SOURCE_FIELD = "fanfuse_source"
"""The LogRecord attribute naming the service that logged it (`Events.source`)."""
PLATFORM_RUN = "platform_run"
SEARCH = "search"
BREAKER = "breaker"

log = logging.getLogger(LOGGER)


def run_fields(run: PlatformRun) -> dict[str, Any]:
    """An ended run's figures; `kind` only when it failed, `latency_s` only when it is a
    latency sample (asked its provider and succeeded)."""
    fields: dict[str, Any] = {
        "event": PLATFORM_RUN,
        "platform": run.name,
        "outcome": run.state.value,
        "calls": len(run.calls),
        "cost_usd": stats_figures.run_spend(run),
        "cache_hits": run.cache.hits if run.cache is not None else 0,
        "cache_misses": run.cache.misses if run.cache is not None else 0,
    }
    kind = stats_figures.failure_kind(run)
    if kind is not None:
        fields["kind"] = kind.value
    latency = stats_figures.latency_sample(run)
    if latency is not None:
        fields["latency_s"] = latency
    return fields


def search_fields(task: Task) -> dict[str, Any]:
    """`duration_s`, start to final status, is what the search latency alerts measure (infra/
    alerts.tf, infra/aws/alerts.tf)."""
    ended = task.finalized_at or task.updated_at
    return {
        "event": SEARCH,
        "status": task.status.value,
        "platforms": len(task.platforms),
        "cost_usd": task.cost.total_usd,
        "duration_s": round(max(0.0, (ended - task.created_at).total_seconds()), 3),
    }


def breaker_changed(name: str, health: PlatformHealth) -> None:
    """A platform's breaker moved to another state (service/circuit.py). Deployment-wide, so
    no service's own (`fanfuse serve` reads the breakers from the store instead)."""
    fields = {
        "event": BREAKER,
        "platform": name,
        "state": health.state.value,
        "reason": health.reason.value if health.reason is not None else "",
    }
    log.info("%s breaker %s", name, health.state.value, extra={EVENT_FIELD: fields})


class Events:
    """One service's events; `source` tells its lines from another service's in one process."""

    def __init__(self) -> None:
        self.source = uuid.uuid4().hex

    def _emit(self, message: str, fields: dict[str, Any]) -> None:
        log.info(message, extra={EVENT_FIELD: fields, SOURCE_FIELD: self.source})

    def runs_ended(self, runs: Iterable[PlatformRun]) -> None:
        if not log.isEnabledFor(logging.INFO):  # nobody listens: no figures to compute
            return
        for run in runs:
            if run.state.terminal:
                self._emit(f"{run.name} {run.state.value}", run_fields(run))

    def search_ended(self, task: Task | None) -> None:
        if task is not None and task.status.terminal:
            self._emit(f"search {task.status.value}", search_fields(task))
