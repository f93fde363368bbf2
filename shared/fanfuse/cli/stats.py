"""`fanfuse stats`: per platform figures over recent searches, read from the store.

Whoever runs it holds the store's credentials (the SQLite file, the project's Firestore, the
table), so it reads as an operator does: every owner's searches, or one owner's with --owner.
The figures and their definitions are `GET /stats`'s (http/stats_route.py, rules/stats_figures.py).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Group
from rich.table import Column
from rich.text import Text

from fanfuse.cli.keys import DynamoOption, StoreOption, opened
from fanfuse.cli.search_view import compact_table, console, fail, notes, out
from fanfuse.http import stats_route
from fanfuse.wire.errors import InvalidRequest
from fanfuse.wire.health import BreakerState
from fanfuse.wire.models import utcnow
from fanfuse.wire.stats_report import PlatformStats, Stats


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}s"


def _outcomes(row: PlatformStats) -> str:
    """The non-zero counts of how the runs ended, e.g. `3 succeeded, 1 timed out`."""
    counts = row.outcomes.model_dump()
    return ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in counts.items() if n)


def stats_table(figures: Stats) -> Group:
    """One row a platform: runs, warm latency p50/p95 and the median cold start, cache hit
    rate, results (unique ones: no other platform found them) and spend; a column no platform
    has a figure for is left out. Under the table, a line a platform: how its runs ended,
    failures by kind, and its breaker when it is not closed. It fits 80 columns."""
    heads = ("platform", "runs", "p50", "p95", "cold", "cache", "results", "unique", "spend")
    rows = [
        (
            row.name,
            str(row.runs),
            _seconds(row.latency_p50_s),
            _seconds(row.latency_p95_s),
            _seconds(row.cold_start_p50_s),
            "" if row.cache_hit_rate is None else f"{row.cache_hit_rate:.0%}",
            str(row.results),
            str(row.unique_results),
            f"${row.spend_usd:.4f}",
        )
        for row in figures.platforms
    ]
    kept = [i for i in range(len(heads)) if i == 0 or any(r[i] for r in rows)]
    table = compact_table(
        *(Column(heads[i], no_wrap=True, justify="left" if i == 0 else "right") for i in kept)
    )
    for cells in rows:
        table.add_row(*(cells[i] for i in kept))
    said = []
    for row in figures.platforms:
        parts = [_outcomes(row)] if row.runs else []
        if row.errors:
            parts.append("failures: " + ", ".join(f"{k} {n}" for k, n in row.errors.items()))
        if row.breaker is not None and row.breaker is not BreakerState.CLOSED:
            parts.append(f"breaker {row.breaker.value}")
        if parts:
            said.append((row.name, "; ".join(parts)))
    title = (
        f"{figures.searches} searches ({figures.finished} finished), last "
        f"{figures.window_s / 3600:g} h, scope {figures.scope}"
    )
    return Group(Text(title, style="bold"), table, *notes(said))


def stats_command(
    window: Annotated[
        str, typer.Option(help="how far back: 30m, 24h, 7d (documents live FANFUSE_TTL_MINUTES)")
    ] = "24h",
    owner: Annotated[
        str | None, typer.Option(help="one owner's searches (a subject, e.g. key:team)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the figures as JSON")] = False,
    firestore: StoreOption = None,
    dynamodb: DynamoOption = False,
) -> None:
    """Per-platform figures over recent searches.

    Per platform: latency p50/p95, outcomes and failures by kind, cache hit rate, results
    and unique results, spend, breaker state; over the store's recent searches."""
    try:
        query = stats_route.StatsQuery(stats_route.parse_window(window, "--window"), owner)
    except InvalidRequest as exc:
        raise fail(str(exc)) from None
    with opened(firestore, dynamodb) as (store, where):
        figures = stats_route.collect(store, store, query, utcnow())
    if as_json:
        out.print_json(figures.model_dump_json())
        return
    console.print(f"{where}", highlight=False)
    if figures.truncated:
        console.print(f"only the newest {figures.searches} searches of the window were read")
    out.print(stats_table(figures))
    out.print(f"spend: ${figures.spend_usd:.4f}", highlight=False)
    paced = pacing_line(figures)
    if paced is not None:
        out.print(paced, highlight=False)


def pacing_line(figures: Stats) -> str | None:
    """`paced: google 12 calls waited 3.4 s, brave 1 call waited 0.02 s`: the calls that waited
    for their provider's pace across workers (service/pacing.py); None when none did."""
    rows = [r for r in figures.platforms if r.paced_calls]
    if not rows:
        return None
    waits = ", ".join(
        f"{r.name} {r.paced_calls} call{'s' if r.paced_calls != 1 else ''} waited {r.paced_s:g} s"
        for r in rows
    )
    return f"paced: {waits}"
