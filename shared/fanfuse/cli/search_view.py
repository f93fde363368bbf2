"""How `fanfuse search` shows a search: live bars while it runs, then tables and notes.

Kept apart from main.py so the command stays a parser; everything here reads a TaskView and
prints, never changes the search (and `fail`, the one-line error every command ends with).
Results are built as rich `Text`, not markup, so a title with brackets prints as it is, and the
result column folds long words: a URL is shown in full, wrapped over as many lines as the
terminal needs, because a cut URL cannot be used.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC

import typer
from rich import box
from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.style import Style
from rich.table import Column, Table
from rich.text import Text

from fanfuse.fronts.plain_text import cost_line, platform_notes, rerank_line, snippet
from fanfuse.rules.progress import platform_percent
from fanfuse.wire.models import (
    BreakerState,
    PlatformInfo,
    PlatformState,
    Result,
    TaskView,
)

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


@contextlib.contextmanager
def phases(first: str, show: bool = True) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr naming the phase a long command is in (`fanfuse index`, `eval`),
    with the seconds it has run; yields the function that names the next phase. Only on a
    terminal: piped or with `show` off, it says nothing."""
    if not (show and console.is_terminal):
        yield lambda message: None
        return
    started = time.monotonic()
    with console.status(first, spinner="dots") as status:

        def step(message: str) -> None:
            status.update(f"{message}  [dim]({time.monotonic() - started:.0f} s)[/]")

        yield step


PREVIEW_ROWS = 5
"""How many of the preview's fused titles show under the bars while a search runs."""


class PreviewProgress(Progress):
    """The bars, then the preview's top titles (`preview`, set by ProgressView) under them."""

    preview: Text | None = None

    def get_renderables(self) -> Iterable[RenderableType]:
        yield from super().get_renderables()
        if self.preview is not None:
            yield self.preview


def progress_bars(show: bool) -> PreviewProgress:
    """One line per bar: name, bar, percent, and the stage's message (cut to fit); under them,
    while a search runs, the top of its fused preview."""
    columns = (
        TextColumn("{task.description}", table_column=Column(width=12, no_wrap=True)),
        BarColumn(bar_width=16),
        TextColumn("{task.percentage:>5.1f}%"),
        TextColumn("{task.fields[note]}", table_column=Column(no_wrap=True, max_width=36)),
    )
    return PreviewProgress(*columns, console=console, disable=not show)


class ProgressView:
    """One bar per platform plus the overall bar, fed by successive TaskViews, and the top of
    the preview under them (gone once the search ends: the result tables follow)."""

    def __init__(self, progress: PreviewProgress) -> None:
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
        self.progress.preview = preview_lines(view)
        self.progress.refresh()  # now, not at the next tick (up to 0.1 s later)


def preview_lines(view: TaskView) -> Text | None:
    """`preview (partial, from a, b):` and the first PREVIEW_ROWS fused titles, one line each;
    None when there is no preview (none arrived yet, or the search is over)."""
    p = view.preview
    if p is None or view.status.terminal:
        return None
    text = Text(f"preview (partial, from {', '.join(p.platforms)}):", style="bold")
    for r in p.results[:PREVIEW_ROWS]:
        text.append(f"\n{r.rank:>3}. ")
        text.append(" ".join(r.title.split()) or r.url)
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


def render_results(view: TaskView) -> None:
    """The result tables (one per query and the fused one; none when nothing was found), then
    what each platform did with the options and the cache, the status line and the errors the
    status line does not already say: a failed search's reason is said once."""
    for label, results in _result_lists(view):
        if not results:
            continue
        # A platform per line, each `name#rank` whole: the column is as wide as the longest.
        ranks = ["\n".join(f"{p}#{r.ranks.get(p, '-')}" for p in r.platforms) for r in results]
        widest = max((len(line) for cell in ranks for line in cell.split("\n")), default=9)
        table = Table(title=label, show_lines=False, expand=True)
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("score", justify="right", no_wrap=True)
        table.add_column("title / url", ratio=1, overflow="fold")
        table.add_column("platforms", no_wrap=True, min_width=max(widest, 9))
        for r, cell in zip(results, ranks, strict=True):
            table.add_row(str(r.rank), f"{r.score:.4f}", _cell(r), cell)
        out.print(table)
    for run in view.platform_runs:
        if run.state is PlatformState.FAILED:
            continue  # its error, below, says why; its query failures would repeat it
        for line in platform_notes(run):
            out.print(line, highlight=False, markup=False, soft_wrap=False)
    if view.rerank is not None:
        out.print(rerank_line(view.rerank), highlight=False, markup=False, soft_wrap=False)
    receipt = cost_line(view.cost)
    if receipt is not None:
        out.print(receipt, highlight=False, markup=False, soft_wrap=False)
    message = view.summary.message if view.summary else view.progress.message
    found = "" if view.results or view.status.value != "completed" else " (nothing found)"
    out.print(
        Text.assemble((f"{view.status.value}:", "bold"), f" {message}{found}"),
        highlight=False,
        soft_wrap=False,
    )
    for err in view.errors:
        if err.error and err.error in message:
            continue
        reason = (err.error or "").removeprefix(f"{err.platform}: ")
        out.print(
            Text.assemble((f"{err.platform} {err.state.value}:", "red"), f" {reason}"),
            highlight=False,
            soft_wrap=False,
        )


def _cell(r: Result) -> Text:
    """Title, then the URL in full, then the snippet (dim) unless it only repeats the title."""
    cell = Text(r.title)
    cell.append("\n")
    cell.append(r.url, style=Style(color="cyan", link=r.url))  # a terminal opens it
    text = snippet(r.snippet)
    title = " ".join(r.title.split())
    # A note's snippet starts with its heading (`# Title ...`): the title line already says it.
    bare = re.sub(r"^#{1,6}\s+", "", text)
    if title and bare.startswith(title + " "):
        text = bare[len(title) :].lstrip()
    if text and text != title:
        cell.append("\n")
        cell.append(text, style="dim")
    return cell


def _result_lists(view: TaskView) -> list[tuple[str, list[Result]]]:
    if view.results_by_query:
        lists = [(f"{q.query!r}", q.results) for q in view.results_by_query]
        return [*lists, ("all queries, fused", view.results)]
    return [(", ".join(repr(q) for q in view.queries), view.results)]


def compact_table(*columns: Column, title: str | None = None) -> Table:
    """A table for an 80-column terminal: no side borders, one space between columns and a
    rule under the heads; whatever does not fit goes in lines under it (`notes`), not in a
    column squeezed until it cuts what it holds."""
    return Table(
        *columns,
        title=title,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        show_edge=False,
        collapse_padding=True,
    )


def notes(lines: Iterable[tuple[str, str]]) -> list[Text]:
    """`name: note` lines, each wrapped at spaces by the console (a name or a variable to
    type is never cut)."""
    return [Text.assemble((f"{name}: ", "bold"), note) for name, note in lines]


def platforms_table(rows: list[PlatformInfo], corpora: dict[str, str] | None = None) -> Group:
    """`fanfuse platforms`: availability, the breaker's state (breaker.py), the measured warm
    latency and cold start (health.py), and the provider calls in flight per process (`--json`
    adds the documented limit it derives from); under the table, one line per platform that
    needs a word: why it is unavailable (the settings to set, named in full), why and until
    when it is suspended, what the deployment's fallback chain for it is, which folder a local
    corpus holds (`corpora`: name -> description); `pace_line` says the pace under the table.
    Short fields only in the table, so it fits 80 columns with room for one more."""
    heads = ("platform", "available", "health", "latency", "cold", "in flight")
    table = compact_table(*(Column(t, no_wrap=True) for t in heads))
    said: list[tuple[str, str]] = []
    for row in rows:
        health = row.health
        reasons = [row.reason] if row.reason else []
        if health is not None and health.state is not BreakerState.CLOSED:
            why = health.reason.value.replace("_", " ") if health.reason else "failures"
            retry = health.retry_at
            until = f" until {retry.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z" if retry else ""
            reasons.append(f"suspended ({why}){until}")
        if row.fallbacks:
            reasons.append(f"falls back to {' then '.join(row.fallbacks)}")
        if corpora and row.name in corpora:
            reasons.append(corpora[row.name])
        if reasons:
            said.append((row.name, "; ".join(reasons)))
        latency = health.latency_s if health is not None else None
        cold = health.cold_start_s if health is not None else None
        table.add_row(
            row.name,
            "yes" if row.available else "no",
            health.state.value if health is not None else "",
            f"{latency:.2f}s" if latency is not None else "",
            f"{cold:.1f}s" if cold is not None else "",
            str(row.max_concurrency) if row.max_concurrency is not None else "local",
        )
    return Group(table, *notes(said))


def pace_line(rows: list[PlatformInfo]) -> str | None:
    """`paced across workers, calls/s: google 1.67, brave 50, arxiv 0.333` under the table (the
    provider's documented rate, or the deployment's: service/pacing.py); None: nothing paced."""
    paced = [f"{r.name} {r.pace_per_second:.3g}" for r in rows if r.pace_per_second is not None]
    return f"paced across workers, calls/s: {', '.join(paced)}" if paced else None
