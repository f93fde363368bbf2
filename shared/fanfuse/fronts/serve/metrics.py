"""`GET /metrics` of `fanfuse serve`: Prometheus' text format, through prometheus-client.

The counts come from the service's events (service/events.py): a logging handler on their
logger keeps the lines of this server's own service and turns each into its counters and the
latency histogram, so the metrics count what Cloud Logging's log-based metrics count on Google
Cloud (infra/monitoring.tf), from the same lines. The breakers' states are read from the store
when scraped (a gauge of now, not a count). Every server has its own CollectorRegistry, never
prometheus-client's global one: two apps in one process (tests, an embedding program) count
apart.

Only operators read it (Settings.operators, or the key `serve` printed): the figures are every
owner's together (docs/security.md, Stats).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fanfuse.http.streams import StreamCap, Watchers
from fanfuse.store.ports import HealthStore
from fanfuse.support.logs import EVENT_FIELD
from fanfuse.wire.models import BreakerState

EVENTS_LOGGER = "fanfuse.events"
"""service/events.py's logger (the fronts import no service module: named here again)."""
SOURCE_FIELD = "fanfuse_source"
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Seconds of a provider's searching stage: from a local index (tens of ms) to an LLM-backed
search (tens of seconds)."""


class Breakers(Collector):
    """`fanfuse_breaker_state{platform, state}`: 1 for each platform's state now, 0 for the
    others (the usual shape of an enum in Prometheus), read from the store when scraped."""

    def __init__(self, health: HealthStore) -> None:
        self.health = health

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            "fanfuse_breaker_state",
            "each platform's circuit breaker: 1 for its state now",
            labels=["platform", "state"],
        )
        for name, health in sorted(self.health.get_health().items()):
            for state in BreakerState:
                gauge.add_metric([name, state.value], 1.0 if health.state is state else 0.0)
        yield gauge


class Streams(Collector):
    """`fanfuse_event_streams` (open now, every caller's) and `fanfuse_search_watchers` (the
    searches they watch, one poller each: fanfuse.http.streams), read when scraped."""

    def __init__(self, watchers: Watchers, cap: StreamCap) -> None:
        self.watchers = watchers
        self.cap = cap

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "fanfuse_event_streams", "event streams open now", value=self.cap.total()
        )
        yield GaugeMetricFamily(
            "fanfuse_search_watchers",
            "searches watched now, each by one poller shared by its streams",
            value=len(self.watchers),
        )


class Metrics(logging.Handler):
    """This server's metrics: its registry, fed by its service's events."""

    def __init__(self, source: str, health: HealthStore) -> None:
        super().__init__(logging.INFO)
        self.source = source
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.searches = Counter(
            "fanfuse_searches", "searches ended, by final status", ["status"], registry=r
        )
        self.runs = Counter(
            "fanfuse_platform_runs",
            "platform runs ended, by outcome (succeeded, failed, timed_out, suspended, cancelled)",
            ["platform", "outcome"],
            registry=r,
        )
        self.errors = Counter(
            "fanfuse_platform_errors",
            "failed platform runs by kind (captcha, rate_limited, denied, error, query, ...)",
            ["platform", "kind"],
            registry=r,
        )
        self.latency = Histogram(
            "fanfuse_platform_latency_seconds",
            "the searching stage's seconds of runs that asked their provider and succeeded",
            ["platform"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.cache = Counter(
            "fanfuse_cache_queries",
            "platform queries answered from the cache (hit) or not (miss)",
            ["platform", "result"],
            registry=r,
        )
        self.calls = Counter(
            "fanfuse_provider_calls", "calls made to providers", ["platform"], registry=r
        )
        self.cost = Counter(
            "fanfuse_cost_usd", "what providers' calls cost, in USD", ["platform"], registry=r
        )
        r.register(Breakers(health))

    def emit(self, record: logging.LogRecord) -> None:
        fields: Any = getattr(record, EVENT_FIELD, None)
        if getattr(record, SOURCE_FIELD, None) != self.source or not isinstance(fields, dict):
            return
        if fields.get("event") == "search":
            self.searches.labels(fields["status"]).inc()
        elif fields.get("event") == "platform_run":
            self._run(fields)

    def _run(self, fields: dict[str, Any]) -> None:
        name = fields["platform"]
        self.runs.labels(name, fields["outcome"]).inc()
        if "kind" in fields:
            self.errors.labels(name, fields["kind"]).inc()
        if "latency_s" in fields:
            self.latency.labels(name).observe(fields["latency_s"])
        self.cache.labels(name, "hit").inc(fields["cache_hits"])
        self.cache.labels(name, "miss").inc(fields["cache_misses"])
        self.calls.labels(name).inc(fields["calls"])
        self.cost.labels(name).inc(fields["cost_usd"])

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def install(self) -> None:
        """Listen to the events logger, at INFO at least (the events are INFO lines)."""
        logger = logging.getLogger(EVENTS_LOGGER)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        logger.addHandler(self)

    def uninstall(self) -> None:
        logging.getLogger(EVENTS_LOGGER).removeHandler(self)
