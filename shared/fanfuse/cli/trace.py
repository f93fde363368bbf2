"""`fanfuse trace TASK_ID`: where one search's time went, from its task document's timeline.

No tracing backend needed: the timeline is in the document (rules/timeline.py). Read from the
store, by whoever holds its credentials (the SQLite file, the project's Firestore, the table), as
for `fanfuse stats`; or with `--endpoint`, from a deployed API's search_status (`fanfuse serve`,
the functions, API Gateway), as the search's owner, with the credentials `fanfuse search
--endpoint` sends (an API key, an ID token, SigV4). `--json` prints the timeline as the API
returns it. When the search was traced, its trace id is printed too, to find its spans (every
hop, store round trips included) in the tracing backend.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Column, Table

from fanfuse.cli.keys import (
    ApiKeyOption,
    AudienceOption,
    AuthOption,
    AwsRegionOption,
    DynamoOption,
    GoogleCredentialsOption,
    IdTokenFileOption,
    StoreOption,
    client_auth,
    explained,
    opened,
)
from fanfuse.cli.search_view import console, fail, out
from fanfuse.rules import timeline
from fanfuse.wire.errors import ApiError, FanfuseError
from fanfuse.wire.models import Task, TaskView
from fanfuse.wire.timeline import Timeline

if TYPE_CHECKING:
    from fanfuse.auth.outbound import ClientAuth


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
    endpoint: Annotated[
        str | None,
        typer.Option(
            help="read it from a deployed API instead of the store: `fanfuse serve`'s URL, a "
            "deployment's base URL, or its start_search or search_status URL"
        ),
    ] = None,
    api_key: ApiKeyOption = None,
    auth: AuthOption = None,
    audience: AudienceOption = None,
    google_credentials: GoogleCredentialsOption = None,
    id_token_file: IdTokenFileOption = None,
    aws_region: AwsRegionOption = None,
) -> None:
    """One search's timeline: per platform queued, started, first result, each stage,
    finished; the fan-in and the finalization (seconds after the request arrived)."""
    task: Task | None
    if endpoint:
        credentials = client_auth(
            auth, api_key, audience, google_credentials, id_token_file, aws_region
        )
        view = _remote_view(endpoint, task_id, credentials)
        task, runs, where = view, view.platform_runs, endpoint
    else:
        with opened(firestore, dynamodb) as (store, where):
            task = store.get_task(task_id)
            runs = store.get_runs(task_id) if task is not None else []
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


def _remote_view(endpoint: str, task_id: str, credentials: ClientAuth) -> TaskView:
    """The search's status from the API at `endpoint`; a search it does not know (or not for
    this caller: the API answers both alike) and a refused credential are the user's to fix
    (exit 2), an unreachable or failing API is not (exit 1)."""
    from fanfuse.http.client import HttpSearchClient

    try:
        client = HttpSearchClient(endpoint, auth=credentials.build(endpoint))
        return asyncio.run(client.status_of(task_id))
    except ApiError as exc:
        if exc.status_code == 404:
            raise fail(f"no search {task_id} at {endpoint}") from None
        raise fail(explained(exc, endpoint), 2 if exc.status_code < 500 else 1) from None
    except FanfuseError as exc:
        raise fail(explained(exc, endpoint), 2 if exc.status_code < 500 else 1) from None
