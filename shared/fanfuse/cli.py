"""`fanfuse search | platforms | index | eval | dev | bench`: a thin shell over the service."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.table import Column, Table

from fanfuse.errors import FanfuseError
from fanfuse.models import TaskView
from fanfuse.progress import platform_percent

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
console = Console(stderr=True)
out = Console()


def fail(message: str, code: int = 2) -> typer.Exit:
    # soft_wrap: one line whatever the width (rich hard-wraps at 80 columns when piped).
    console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


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
    for label, results in _result_lists(view):
        table = Table(title=label, show_lines=False, expand=True)
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("score", justify="right", no_wrap=True)
        table.add_column("title / url", ratio=3)
        table.add_column("platforms", ratio=1)
        for r in results:
            ranks = ", ".join(f"{p}#{r.ranks.get(p, '-')}" for p in r.platforms)
            table.add_row(str(r.rank), f"{r.score:.4f}", f"{r.title}\n[dim]{r.url}[/]", ranks)
        out.print(table)
    message = view.summary.message if view.summary else view.progress.message
    out.print(f"[bold]{view.status.value}[/]: {message}", highlight=False)
    for err in view.errors:
        out.print(f"[red]{err.platform} {err.state.value}:[/] {err.error}", highlight=False)


def _result_lists(view: TaskView) -> list[tuple[str, list[Any]]]:
    if view.results_by_query:
        lists: list[tuple[str, list[Any]]] = [
            (f"{q.query!r}", q.results) for q in view.results_by_query
        ]
        return [*lists, ("all queries, fused", view.results)]
    return [(", ".join(repr(q) for q in view.queries), view.results)]


@app.command()
def search(
    query: Annotated[list[str], typer.Argument(help="one query, or up to 5")],
    platform: Annotated[str, typer.Option("--platform", "-p", help="all | name | a, b")] = "all",
    max_results: Annotated[int, typer.Option("--max-results", "-n")] = 10,
    content: Annotated[bool, typer.Option("--content", help="fetch page content")] = False,
    fusion: Annotated[str | None, typer.Option(help="rrf | score | concat")] = None,
    language: Annotated[str | None, typer.Option()] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the final task as JSON")] = False,
    endpoint: Annotated[
        str | None, typer.Option(help="start_search URL of a deployed or `fanfuse dev` stack")
    ] = None,
) -> None:
    """Run one search and show live progress per platform, then the fused results."""
    payload: dict[str, Any] = {
        "query": query if len(query) > 1 else query[0],
        "platform": platform,
        "max_results": max_results,
        "include_content": content,
    }
    if fusion:
        payload["fusion"] = fusion
    if language:
        payload["language"] = language
    try:
        view = asyncio.run(_run_search(payload, endpoint, show_progress=not as_json))
    except FanfuseError as exc:
        raise fail(str(exc)) from None
    if as_json:
        sys.stdout.write(view.model_dump_json(indent=2) + "\n")
    else:
        render_results(view)
    if view.status.value in ("failed", "cancelled"):
        raise typer.Exit(1)


async def _run_search(
    payload: dict[str, Any], endpoint: str | None, show_progress: bool
) -> TaskView:
    columns = (
        TextColumn("{task.description}", table_column=Column(width=12, no_wrap=True)),
        BarColumn(bar_width=16),
        TextColumn("{task.percentage:>5.1f}%"),
        TextColumn("{task.fields[note]}", table_column=Column(no_wrap=True, max_width=36)),
    )
    with Progress(*columns, console=console, disable=not show_progress) as bars:
        on_update = ProgressView(bars)
        if endpoint:
            from fanfuse.client import HttpSearchClient

            return await HttpSearchClient(endpoint).search(payload, on_update)
        from fanfuse.runtime import EmbeddedRuntime

        async with EmbeddedRuntime() as runtime:
            return await runtime.search(payload, on_update)


@app.command()
def platforms(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the platforms, which are available here, and why the others are not."""
    from fanfuse.platforms import Registry
    from fanfuse.settings import Settings

    registry = Registry.from_settings(Settings())
    rows = [(name, registry.unavailable_reason(name)) for name in registry.names()]
    if as_json:
        data = [{"name": n, "available": r is None, "reason": r} for n, r in rows]
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    table = Table("platform", "available", "why not")
    for name, reason in rows:
        table.add_row(name, "yes" if reason is None else "no", reason or "")
    out.print(table)


@app.command()
def index(
    path: Annotated[Path | None, typer.Argument(help="TREC file, JSONL file or folder")] = None,
    dense: Annotated[bool, typer.Option(help="also build the dense (vectors) index")] = True,
) -> None:
    """Build and cache the BM25 (and dense) index of a corpus; Vaswani by default."""
    from fanfuse.evaluation import build_indexes

    try:
        build_indexes(path, dense=dense)
    except (ValueError, OSError) as exc:
        raise fail(str(exc)) from None


@app.command("eval")
def evaluate(
    corpus: Annotated[Path | None, typer.Option(help="TREC corpus (default: Vaswani)")] = None,
    queries: Annotated[Path | None, typer.Option(help="TREC topics")] = None,
    qrels: Annotated[Path | None, typer.Option(help="TREC qrels")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Score docs, vectors and every fuser against relevance judgements (ir-measures)."""
    from fanfuse.evaluation import render_report, run_evaluation

    try:
        report = run_evaluation(corpus, queries, qrels, show_progress=not as_json)
    except (ValueError, OSError) as exc:
        raise fail(str(exc)) from None
    for note in report.notes:
        console.print(f"note: {note}", highlight=False)
    if as_json:
        sys.stdout.write(report.model_dump_json(include={"runs"}, indent=2) + "\n")
    else:
        out.print(render_report(report))


@app.command()
def dev(
    platform: Annotated[
        str, typer.Option("--platform", "-p", help="queues to create: all available, or a, b")
    ] = "all",
    firestore_port: Annotated[int | None, typer.Option(help="default: a free port")] = None,
    start_search_port: Annotated[int | None, typer.Option(help="default: a free port")] = None,
) -> None:
    """Start the local cloud stack (emulators + functions on 127.0.0.1) until Ctrl-C or SIGTERM."""
    import time

    from fanfuse.devstack import LocalStack
    from fanfuse.platforms import Registry
    from fanfuse.request import split_platforms
    from fanfuse.settings import Settings

    names = split_platforms(platform)
    if names == ["all"]:
        names = Registry.from_settings(Settings()).available()
    ports = {"start_search": start_search_port} if start_search_port else None
    stack = LocalStack(names, firestore_port=firestore_port, function_ports=ports)
    try:
        with stack:
            for component, address in stack.describe():
                out.print(f"{component:<14} {address}", highlight=False)
            out.print(
                f"ready: fanfuse search --endpoint {stack.addresses.functions['start_search']}"
                ' "your query"   (Ctrl-C stops everything)',
                highlight=False,
            )
            while True:
                time.sleep(1)
    except KeyboardInterrupt:
        pass
    except RuntimeError as exc:
        raise fail(str(exc), 1) from None


def _register_bench() -> None:
    from fanfuse.bench import bench_app

    app.add_typer(bench_app, name="bench")


_register_bench()

if __name__ == "__main__":
    app()
