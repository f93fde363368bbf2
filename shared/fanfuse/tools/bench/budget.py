"""`fanfuse bench budget`: what the budget check costs a search, as a ratio to one without.

Three stub SearXNG platforms on 127.0.0.1 answering at once (so the provider's time does not
hide fanfuse's own), priced by the deployment (`Settings.prices`: $0.005, $0.01, $0.02 a
request), on the embedded runtime over SQLite. Four series, taking turns run by run so a drift
of the machine touches them alike, each run `searches` searches one after another:

- `plain`: no caller, no cap: a search without budgets (its plan is still priced: the receipt's
  estimate, which every search carries);
- `cap`: the same with `max_cost_usd` (the per-request check, then each platform's money share);
- `key`: a verified caller (the start-rate take and the in-flight count), no budget;
- `key+budget`: that caller with a daily budget and a cap: the reservation (one conditional
  write of the key's day document) at start, its settlement (one more) at the end.

A time is from the start call to the terminal status an in-process poller sees (polling every
POLL seconds), so it holds the whole search: the budget check's share is `cap / plain` for the
per-request cap and `key+budget / key` for the daily budget. `start` times the start path alone
(`SearchService.start` on a queue that drops its messages) for the same four cases, where the
check's share is largest. `check` times the check alone, as the start runs it (`Budgets.plan`:
the plan priced, held to the cap) and, for a key with a daily budget, with its reservation and
its settlement (two one-document writes): its median over a `plain` search's is the check's
cost per search, free of the two medians' noise. A figure is the median of `runs` runs after
one warm-up run. Every search's plan is priced, budget or not (its receipt carries the
estimate): `plain` includes that, which `check/cap` times on its own.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from fanfuse.settings import Settings
from fanfuse.tools.bench.common import DEFAULT_RUNS, Samples, check_completed
from fanfuse.tools.bench.quota import ADMIT_ALL, DiscardQueue
from fanfuse.tools.stubs import RESULTS_PER_PAGE, StubSearxServer
from fanfuse.wire.cost import Price
from fanfuse.wire.instances import ExtraPlatform
from fanfuse.wire.models import Caller

POLL = 0.002
PRICES = {"bench_a": 0.005, "bench_b": 0.01, "bench_c": 0.02}
SERIES = ("plain", "cap", "key", "key+budget")
DEFAULT_SEARCHES = 20
CAP_USD = 1.0
"""Far over a search's estimate ($0.035): the check passes, as it does for most searches."""


class BudgetSeries(Samples):
    """One case: milliseconds per search (or per start), one sample per run."""

    what: str
    case: str


class BudgetReport(BaseModel):
    runs: int
    searches: int
    series: list[BudgetSeries]

    def get(self, what: str, case: str) -> BudgetSeries:
        return next(s for s in self.series if (s.what, s.case) == (what, case))

    def ratio(self, what: str, case: str, base: str) -> float:
        """The median of the runs' ratios: each run of `case` over the run of `base` taken just
        before it, so a drift of a busy machine between runs mostly cancels out."""
        pairs = zip(self.get(what, case).samples, self.get(what, base).samples, strict=True)
        return statistics.median(a / b for a, b in pairs)

    def render(self) -> str:
        lines = [
            f"fanfuse bench budget: 3 priced stub platforms answering at once, embedded "
            f"runtime on SQLite; medians of {self.runs} runs of {self.searches} searches "
            "(ms each), after one warm-up run",
            f"{'series':<8}{'case':<12}{'median ms':>11}{'min':>9}{'max':>9}",
        ]
        for s in self.series:
            lines.append(
                f"{s.what:<8}{s.case:<12}{s.median:>11.3f}{min(s.samples):>9.3f}"
                f"{max(s.samples):>9.3f}"
            )
        plain = self.get("search", "plain").median
        for case in ("cap", "daily"):
            lines.append(
                f"the check alone, {case}: {self.get('check', case).median:.3f} ms = "
                f"{self.get('check', case).median / plain:.2%} of a search without budgets"
            )
        for what in ("search", "start"):
            lines.append(
                f"{what} (median of paired runs' ratios): with a cap / without budgets = "
                f"{self.ratio(what, 'cap', 'plain'):.3f}; a key with a daily budget and a cap / "
                f"the key without = {self.ratio(what, 'key+budget', 'key'):.3f}"
            )
        return "\n".join(lines)


def _cases(names: list[str]) -> dict[str, tuple[dict[str, Any], Caller | None]]:
    payload: dict[str, Any] = {
        "query": "budget bench",
        "platform": names,
        "max_results": RESULTS_PER_PAGE,
        "cache": "bypass",
    }
    capped = {**payload, "max_cost_usd": CAP_USD}
    key = Caller(subject="key:bench", via="api_key", rate_per_minute=ADMIT_ALL, max_in_flight=10**6)
    daily = key.model_copy(update={"subject": "key:bench-daily", "daily_budget_usd": 1e9})
    return {
        "plain": (payload, None),
        "cap": (capped, None),
        "key": (payload, key),
        "key+budget": (capped, daily),
    }


def _settings(stub: StubSearxServer, db: Path) -> Settings:
    platforms = {
        name: ExtraPlatform(
            engine="searxng", settings={"base_url": stub.url("delay/0"), "max_attempts": 1}
        )
        for name in PRICES
    }
    return Settings(
        db_path=db,
        extra_platforms=platforms,
        prices={name: Price(per_request_usd=usd) for name, usd in PRICES.items()},
        progress_interval=1.0,
    )


async def _search_runs(settings: Settings, runs: int, searches: int) -> dict[str, list[float]]:
    from fanfuse.runtimes.embedded import EmbeddedRuntime

    cases = _cases(list(PRICES))
    samples: dict[str, list[float]] = {case: [] for case in SERIES}
    async with EmbeddedRuntime(settings) as rt:
        for _ in range(runs + 1):
            for case in SERIES:
                payload, caller = cases[case]
                started = time.perf_counter()
                for _ in range(searches):
                    accepted = rt.service.start(payload, caller=caller)
                    view = await rt.wait(accepted.task_id, poll=POLL)
                    check_completed(view.status.value, f"budget {case}")
                samples[case].append((time.perf_counter() - started) * 1000 / searches)
    return {case: found[1:] for case, found in samples.items()}


def _start_runs(settings: Settings, runs: int, searches: int) -> dict[str, list[float]]:
    from fanfuse.platforms import Registry
    from fanfuse.service.service import SearchService
    from fanfuse.store.sqlite import SqliteStore

    cases = _cases(list(PRICES))
    store = SqliteStore(settings.db_path.with_name("starts.db"))
    service = SearchService(store, DiscardQueue(), Registry.from_settings(settings), settings)
    samples: dict[str, list[float]] = {case: [] for case in SERIES}
    try:
        for _ in range(runs + 1):
            for case in SERIES:
                payload, caller = cases[case]

                def start(p: dict[str, Any] = payload, c: Caller | None = caller) -> object:
                    return service.start(p, caller=c)

                samples[case].append(_time(start, searches))
    finally:
        store.close()
    return {case: found[1:] for case, found in samples.items()}


def _check_runs(settings: Settings, runs: int, checks: int) -> dict[str, list[float]]:
    from fanfuse.platforms import Registry
    from fanfuse.rules import budget
    from fanfuse.service.budgets import Budgets
    from fanfuse.store.sqlite import SqliteStore
    from fanfuse.wire.models import SearchRequest, utcnow

    cases = _cases(list(PRICES))
    store = SqliteStore(settings.db_path.with_name("checks.db"))
    budgets = Budgets(store, Registry.from_settings(settings), settings)
    payload, key = cases["key+budget"]
    request = SearchRequest.model_validate(payload)
    assert key is not None

    def cap() -> object:
        return budgets.plan(request, None, utcnow())

    def daily() -> object:
        now = utcnow()
        planned = budgets.plan(request, key, now)  # the reservation
        settle = budget.adjust(-planned.cost.estimate_usd, now)  # as settle() writes it
        return store.take_quota(budget.day_key(key.subject, now, key.key_id), settle)

    samples: dict[str, list[float]] = {"cap": [], "daily": []}
    try:
        for _ in range(runs + 1):
            samples["cap"].append(_time(cap, checks))
            samples["daily"].append(_time(daily, checks))
    finally:
        store.close()
    return {case: found[1:] for case, found in samples.items()}


def _time(op: Callable[[], object], n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        op()
    return (time.perf_counter() - started) * 1000 / n


def run_budget(runs: int = DEFAULT_RUNS, searches: int = DEFAULT_SEARCHES) -> BudgetReport:
    with (
        tempfile.TemporaryDirectory(prefix="fanfuse-bench-budget-") as tmp,
        StubSearxServer() as stub,
    ):
        settings = _settings(stub, Path(tmp) / "fanfuse.db")
        full = asyncio.run(_search_runs(settings, runs, searches))
        starts = _start_runs(settings, runs, searches * 5)
        checks = _check_runs(settings, runs, searches * 5)
    series = [
        BudgetSeries(what=what, case=case, samples=found[case])
        for what, found in (("search", full), ("start", starts), ("check", checks))
        for case in found
    ]
    assert all(statistics.median(s.samples) > 0 for s in series)
    return BudgetReport(runs=runs, searches=searches, series=series)
