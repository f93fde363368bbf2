"""How `fanfuse search` shows a search: live bars while it runs, then tables and notes.

Kept apart from cli.py so the command stays a parser; everything here reads a TaskView and
prints, never changes the search (and `fail`, the one-line error every command ends with).
Results are built as rich `Text`, not markup, so a title with brackets prints as it is, and the
result column folds long words: a URL is shown in full, wrapped over as many lines as the
terminal needs, because a cut URL cannot be used.
"""

from __future__ import annotations

from datetime import UTC

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.table import Column, Table
from rich.text import Text

from fanfuse.models import (
    BreakerState,
    CacheNote,
    CacheState,
    PlatformInfo,
    PlatformRun,
    RerankNote,
    Result,
    TaskView,
)
from fanfuse.options import Applied, CacheMode, OptionUse
from fanfuse.progress import platform_percent

console = Console(stderr=True)
"""Errors and progress: stderr, so stdout holds only the results (or the JSON)."""
out = Console()


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print `error: message` on stderr and return the exit to raise (2: the caller's mistake)."""
    # soft_wrap: one line whatever the width (rich hard-wraps at 80 columns when piped); Text,
    # not markup, so a message quoting brackets (a bad value, a path) prints as it is.
    line = Text.assemble(("error:", "bold red"), f" {message}")
    console.print(line, highlight=False, soft_wrap=True)
    return typer.Exit(code)


SNIPPET_CHARS = 200
"""A snippet is a hint of the page, not the page: longer ones are cut (a URL never is)."""


def progress_bars(show: bool) -> Progress:
    """One line per bar: name, bar, percent, and the stage's message (cut to fit)."""
    columns = (
        TextColumn("{task.description}", table_column=Column(width=12, no_wrap=True)),
        BarColumn(bar_width=16),
        TextColumn("{task.percentage:>5.1f}%"),
        TextColumn("{task.fields[note]}", table_column=Column(no_wrap=True, max_width=36)),
    )
    return Progress(*columns, console=console, disable=not show)


class ProgressView:
    """One bar per platform plus the overall bar, fed by successive TaskViews."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.bars: dict[str, TaskID] = {}
        self.overall: TaskID | None = None

    def __call__(self, view: TaskView) -> None:
        if self.overall is None:
            self.overall = self.progress.add_task("overall", total=100, note="")
            for run in view.platform_runs:
                self.bars[run.name] = self.progress.add_task(run.name, total=100, note="")
        for run in view.platform_runs:
            note = run.message.removeprefix(f"Platform {run.index}/{run.of} ({run.name}): ")
            self.progress.update(self.bars[run.name], completed=platform_percent(run), note=note)
        self.progress.update(
            self.overall, completed=view.progress.percent, note=view.progress.message
        )


def render_results(view: TaskView) -> None:
    """The result tables (one per query and the fused one), then what each platform did with
    the options and the cache, the status line and the platforms' errors."""
    for label, results in _result_lists(view):
        table = Table(title=label, show_lines=False, expand=True)
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("score", justify="right", no_wrap=True)
        table.add_column("title / url", ratio=3, overflow="fold")
        table.add_column("platforms", ratio=1)
        for r in results:
            ranks = ", ".join(f"{p}#{r.ranks.get(p, '-')}" for p in r.platforms)
            table.add_row(str(r.rank), f"{r.score:.4f}", _cell(r), ranks)
        out.print(table)
    for run in view.platform_runs:
        for line in platform_notes(run):
            out.print(line, highlight=False, markup=False, soft_wrap=True)
    if view.rerank is not None:
        out.print(rerank_line(view.rerank), highlight=False, markup=False, soft_wrap=True)
    message = view.summary.message if view.summary else view.progress.message
    out.print(f"[bold]{view.status.value}[/]: {message}", highlight=False)
    for err in view.errors:
        out.print(
            Text.assemble((f"{err.platform} {err.state.value}:", "red"), f" {err.error}"),
            highlight=False,
        )


def _cell(r: Result) -> Text:
    """Title, then the URL in full, then the snippet (dim) unless it only repeats the title."""
    cell = Text(r.title)
    cell.append("\n")
    cell.append(r.url, style="cyan")
    text = snippet(r.snippet)
    if text and text != " ".join(r.title.split()):
        cell.append("\n")
        cell.append(text, style="dim")
    return cell


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """`text` on one line, cut to `limit` characters (an ellipsis marks the cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _result_lists(view: TaskView) -> list[tuple[str, list[Result]]]:
    if view.results_by_query:
        lists = [(f"{q.query!r}", q.results) for q in view.results_by_query]
        return [*lists, ("all queries, fused", view.results)]
    return [(", ".join(repr(q) for q in view.queries), view.results)]


def platform_notes(run: PlatformRun) -> list[str]:
    """What to know about one platform's results, one line each; none when there is nothing.

    `google: filtered include_domains -3 (post_filter), time_range native; cache hit (age 42s);
    capped page fetches at 66 (434 skipped)` and `google: query 2 failed: HTTP 500`. A plain
    cache miss is not news and is left out.
    """
    parts = []
    if run.options:
        parts.append("filtered " + ", ".join(_option(n, u) for n, u in run.options.items()))
    cache = _cache(run.cache)
    if cache:
        parts.append(cache)
    parts += [
        f"capped {name.replace('_', ' ')} at {cut.cap} ({cut.skipped} skipped)"
        for name, cut in run.limits.items()
    ]
    lines = [f"{run.name}: {'; '.join(parts)}"] if parts else []
    lines += [
        f"{run.name}: query {f.query_index + 1} failed: {f.error}" for f in run.failed_queries
    ]
    return lines


def rerank_line(note: RerankNote) -> str:
    """`reranked by llm (qwen-plus): 20 candidates` or `not reranked: <why>`."""
    if not note.applied:
        return f"not reranked ({note.method}): {note.error}"
    model = f" ({note.model})" if note.model else ""
    return f"reranked by {note.method}{model}: {note.candidates} candidates"


def _option(name: str, use: OptionUse) -> str:
    if use.applied is Applied.POST_FILTER:
        return f"{name} -{use.removed} (post_filter)"
    if use.applied is Applied.NATIVE:
        return f"{name} native"
    return f"{name} not applied"


def _cache(note: CacheNote | None) -> str | None:
    if note is None:
        return None
    age = f" (age {_age(note.age_s)})" if note.age_s is not None else ""
    if note.state is CacheState.HIT:
        return f"cache hit{age}"
    if note.state is CacheState.PARTIAL:
        return f"cache partial: {note.hits} hit, {note.misses} searched{age}"
    if note.mode is CacheMode.BYPASS:
        return "cache bypassed (entries refreshed)"
    if note.mode is CacheMode.ONLY:
        return "cache miss (cache only)"
    return None


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def platforms_table(rows: list[PlatformInfo]) -> Table:
    """`fanfuse platforms`: availability, the breaker's state (breaker.py) and the measured
    latency; the notes say why a platform is unavailable, or why and until when suspended."""
    whole = [Column(t, no_wrap=True) for t in ("platform", "available", "health", "latency")]
    table = Table(*whole, "notes")  # on a narrow terminal only the notes wrap
    for row in rows:
        health = row.health
        notes = [row.reason] if row.reason else []
        if health is not None and health.state is not BreakerState.CLOSED:
            why = health.reason.value.replace("_", " ") if health.reason else "failures"
            retry = health.retry_at
            until = f" until {retry.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z" if retry else ""
            notes.append(f"suspended ({why}){until}")
        latency = health.latency_s if health is not None else None
        table.add_row(
            row.name,
            "yes" if row.available else "no",
            health.state.value if health is not None else "",
            f"{latency:.2f}s" if latency is not None else "",
            "; ".join(notes),
        )
    return table
