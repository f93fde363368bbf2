"""`fanfuse trace TASK_ID`: where one search's time went, from its task document's timeline.

No tracing backend needed: the timeline is in the document (rules/timeline.py). Whoever runs
it holds the store's credentials (the SQLite file, the project's Firestore, the table), as for
`fanfuse stats`; `--json` prints the timeline as the API returns it. When the search was traced,
its trace id is printed too, to find its spans (every hop, store round trips included) in the
tracing backend.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Column, Table

from fanfuse.cli.keys import DynamoOption, StoreOption, opened
from fanfuse.cli.render import console, fail, out
from fanfuse.rules import timeline
from fanfuse.wire.models import PlatformRun, Task
from fanfuse.wire.timeline import Timeline


def _at(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}s"


def timeline_table(task: Task, kept: Timeline) -> Table:
    """A row a platform, moments in seconds after the request arrived, then its stages."""
    columns = ("platform", "state", "queued", "started", "working", "1st result", "finished")
    table = Table(
        *(
            Column(c, no_wrap=True, justify="left" if c in columns[:2] else "right")
            for c in columns
        ),
        "stages",
        Column("try", justify="right"),
        Column("calls", justify="right"),
        title=f"search {task.task_id}: {task.status.value}, {len(task.platforms)} platforms",
    )
    for e in kept.runs:
        table.add_row(
            e.platform,
            e.state,
            _at(e.queued),
            _at(e.started),
            _at(e.working),
            _at(e.first_result),
            _at(e.finished),
            ", ".join(f"{stage} {seconds:.3f}s" for stage, seconds in e.stages.items()),
            str(e.attempt),
            str(e.calls),
        )
    return table


def summary_lines(task: Task, kept: Timeline) -> list[str]:
    """The search's own moments, the slowest platform's end, and its trace id."""
    lines = []
    ends = [e.finished for e in kept.runs if e.finished is not None]
    if ends:
        lines.append(f"slowest platform ended at {max(ends):.3f}s")
    if kept.fan_in is not None:
        lines.append(f"fan-in (every platform counted) at {kept.fan_in:.3f}s")
    if kept.finalized is not None:
        lines.append(f"finalized at {kept.finalized:.3f}s by {kept.finalized_by}")
        if ends:
            lines.append(f"past the slowest platform: {kept.finalized - max(ends):.3f}s")
    if task.trace:
        lines.append(f"trace id {task.trace.split('-')[1]} (its spans in the tracing backend)")
    return lines


def trace_command(
    task_id: Annotated[str, typer.Argument(help="the search's task id")],
    as_json: Annotated[bool, typer.Option("--json", help="print the timeline as JSON")] = False,
    firestore: StoreOption = None,
    dynamodb: DynamoOption = False,
) -> None:
    """One search's timeline: per platform queued, started, first result, each stage,
    finished; the fan-in and the finalization (seconds after the request arrived)."""
    with opened(firestore, dynamodb) as (store, where):
        task = store.get_task(task_id)
        runs: list[PlatformRun] = store.get_runs(task_id) if task is not None else []
    if task is None:
        raise fail(f"no search {task_id} in {where}")
    kept = timeline.live(task, runs)
    if as_json:
        body = {"task_id": task.task_id, "status": task.status.value, "trace": task.trace}
        out.print_json(data={**body, "timeline": kept.model_dump(mode="json")})
        return
    console.print(where, highlight=False)
    out.print(timeline_table(task, kept))
    for line in summary_lines(task, kept):
        out.print(line, highlight=False)
