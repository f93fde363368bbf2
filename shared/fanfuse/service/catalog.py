"""What a request may ask of this deployment: its platforms, available or why not, and validation.

Split from the service so that serve's document (http/deployment.py), `/platforms` and a start's
validation read one answer, reused for AVAILABILITY_TTL_S.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from fanfuse.platforms import Registry
from fanfuse.rules import health
from fanfuse.settings import Settings
from fanfuse.store.ports import HealthStore
from fanfuse.tracing import spans
from fanfuse.wire.errors import InvalidRequest, problems_of
from fanfuse.wire.models import PlatformInfo, Problem, SearchRequest

AVAILABILITY_TTL_S = 10.0
"""How long validation reuses which platforms are available here. Finding out builds every
platform's settings from the environment (about 10 ms for twenty platforms, more than checking
a 64 KiB body), and it changes only when the deployment does; without the reuse every start,
invalid ones included, would pay it."""


class Catalog:
    def __init__(self, store: HealthStore, registry: Registry, settings: Settings) -> None:
        self.store, self.registry, self.settings = store, registry, settings
        self._reasons: tuple[float, dict[str, str | None]] | None = None

    @spans.traced("validate")
    def validate(self, payload: Any) -> SearchRequest:
        if isinstance(payload, SearchRequest):
            payload = payload.model_dump(exclude_none=True)
        if not isinstance(payload, Mapping):
            raise InvalidRequest([Problem(field="body", problem="expected a JSON object")])
        reasons = self._availability()
        chains = self.chains()
        context = {
            "available": self._alone(reasons, chains),
            "unavailable": {n: r for n, r in reasons.items() if r is not None},
            "runnable": [n for n, r in reasons.items() if r is None],
            "chains": chains,
            "deadline_seconds": self.settings.deadline_seconds,
            "max_queries": self.settings.max_queries,
            "max_platforms": self.settings.max_platforms,
            "by_latency": self.by_latency,  # called only for a mode that picks the quickest
        }
        try:
            return SearchRequest.model_validate(dict(payload), context=context)
        except ValidationError as exc:
            raise InvalidRequest(problems_of(exc)) from None

    def _availability(self) -> dict[str, str | None]:
        """Each platform's reason to be unavailable here (None: available), read at most once
        per AVAILABILITY_TTL_S (one tuple swapped whole: safe from serve's checking thread)."""
        now = time.monotonic()
        cached = self._reasons
        if cached is not None and now - cached[0] < AVAILABILITY_TTL_S:
            return cached[1]
        reasons = {n: self.registry.unavailable_reason(n) for n in self.registry.names()}
        self._reasons = (now, reasons)
        return reasons

    def chains(self) -> dict[str, list[str]]:
        """The deployment's fallback chains over the platforms known here (selection.py)."""
        known = set(self.registry.names())
        return {
            name: [f for f in chain.fallbacks if f in known and f != name]
            for name, chain in self.settings.chains.items()
            if name in known
        }

    @staticmethod
    def _alone(reasons: Mapping[str, str | None], chains: Mapping[str, list[str]]) -> list[str]:
        """The names a request may enter alone: able to run, or through their chain."""
        return [
            name
            for name, reason in reasons.items()
            if reason is None or any(reasons.get(f) is None for f in chains.get(name, ()))
        ]

    def runnable(self) -> list[str]:
        """The platforms that can run here themselves (a chain needs one of them)."""
        return [name for name, reason in self._availability().items() if reason is None]

    def available(self) -> list[str]:
        """The platforms a request may name here now (as `validate` reads them)."""
        return self._alone(self._availability(), self.chains())

    def platforms(self) -> list[PlatformInfo]:
        """Every platform with its health in this deployment's store (breaker.py, health.py)."""
        return self.registry.describe(self.store.get_health(), self.chains())

    def by_latency(self, names: Sequence[str]) -> list[str]:
        """`names` quickest first, by this deployment's measurements (see health.py)."""
        priors = {n: self.registry.get(n).typical_latency_s for n in names}
        return health.by_latency(names, self.store.get_health(), priors)
