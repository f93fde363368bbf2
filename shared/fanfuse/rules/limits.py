"""Per-search caps on provider calls and page fetches: each platform's share, and its counter.

Why: one request may ask for 5 queries on every platform at depth 100 with content, which is
a provider call per page of results and a page fetch per hit: thousands of requests, the page
fetches aimed wherever the results point, for the price of one start. The deployment caps both
per search (`Settings.max_provider_calls_per_search`, `Settings.max_page_fetches_per_search`).

A search's platforms run in different workers (Cloud Tasks deliveries, Lambda invocations, the
embedded runtime's tasks) that share only the store. Counting the search's calls exactly there
would be a store transaction per call on one document, which Firestore allows about once a
second. Instead each platform gets an equal share of the cap, `cap // platforms`, and counts its
own calls in memory: no write, exactly enforced, and the search's total never passes the cap
(or the number of platforms, when there are more platforms than the cap: each is asked once).
The price is that a share a platform leaves unused is not given to another.

Counted are requests, not attempts: the runner's retries of one request are bounded on their
own (`max_attempts`). A cut is reported on the platform document (`PlatformRun.limits`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fanfuse.wire.models import Hit, LimitCut

PROVIDER_CALLS = "provider_calls"
PAGE_FETCHES = "page_fetches"
COST = "cost"
"""The run's share of the search's money, counted in the calls it affords (rules/budget.py)."""


def share(cap: int, platforms: int) -> int:
    """One platform's part of a per-search cap: an equal share, at least one call."""
    return max(cap // max(platforms, 1), 1)


@dataclass
class Budget:
    """One platform run's share of one cap, counted as the run spends it (one event loop, so
    no lock: a take is never interrupted)."""

    cap: int
    used: int = 0
    skipped: int = 0

    def take(self) -> bool:
        """Spend one; False (counted as skipped) once the share is spent."""
        if self.used >= self.cap:
            self.skipped += 1
            return False
        self.used += 1
        return True

    def choose(self, hits: Sequence[Hit], wanted: Sequence[int]) -> list[int]:
        """The indices of `wanted` to work on within the share, best ranked first across the
        run's queries (every query's first result before any query's second: a cut keeps each
        query's top pages); the rest are counted as skipped."""
        order = sorted(wanted, key=lambda i: (hits[i].rank or 0, hits[i].query_index, i))
        chosen = [i for i in order if self.take()]
        return sorted(chosen)

    def cut(self) -> LimitCut | None:
        """What to report when the cap cut anything, else None."""
        if not self.skipped:
            return None
        return LimitCut(cap=self.cap, used=self.used, skipped=self.skipped)


def cuts(budgets: dict[str, Budget | None]) -> dict[str, LimitCut]:
    """The caps that cut, by name, for the platform document."""
    found = {name: b.cut() for name, b in budgets.items() if b is not None}
    return {name: cut for name, cut in found.items() if cut is not None}
