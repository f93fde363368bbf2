"""What a model reads back from a search: short markdown, and a trimmed structured document.

A TaskView carries every platform's raw hits, call records and timings; a model needs the fused
results and one line of status. The markdown follows the multi-query proposal's MCP formatting
(`## Query 1: "..."` sections separated by `---`, numbered results, snippets cut to about 200
characters); `Digest` is the same content as structured data (the tools' outputSchema).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from fanfuse.fronts.plain_text import SNIPPET_CHARS, cost_line, rerank_line, snippet
from fanfuse.rules import timeline
from fanfuse.rules.progress import platform_percent
from fanfuse.wire.cost import Cost
from fanfuse.wire.models import PlatformState, QueryResults, Result, TaskStatus, TaskView
from fanfuse.wire.timeline import Timeline

ERROR_CHARS = 120
"""A platform's error on the status line is a hint; the whole text is in get_search_status."""
CONTENT_CHARS = 1200
"""Page content in the markdown, per result: a `comprehensive` search fetches every page, and
ten whole pages would crowd a model's context; the structured content keeps all of it."""


class DigestResult(BaseModel):
    rank: int
    title: str
    url: str = Field(description="the cleanest URL the platforms gave")
    snippet: str = Field(description=f"cut to about {SNIPPET_CHARS} characters")
    platforms: list[str] = Field(description="the platforms that found it")
    score: float
    published_at: datetime | None = None
    content: str | None = Field(default=None, description="page content, when requested")


class DigestQuery(BaseModel):
    query: str
    results: list[DigestResult]
    failed: list[str] = Field(default_factory=list, description="`platform: error` per failure")


class DigestPlatform(BaseModel):
    name: str
    state: PlatformState
    percent: float
    message: str
    error: str | None = None
    answered_by: list[str] = Field(
        default_factory=list, description="a fallback chain (a|b): the members that answered"
    )


class DigestPreview(BaseModel):
    """While a search runs: its results so far, fused from the platforms that have answered."""

    partial: Literal[True] = Field(default=True, description="always true: not the final answer")
    platforms: list[str] = Field(description="the platforms whose results it fuses")
    queries: list[DigestQuery] = Field(description="one fused list per query, so far")


class Digest(BaseModel):
    """A search as the tools return it: progress while it runs, results once it is over."""

    task_id: str
    status: TaskStatus
    percent: float
    message: str
    platforms: list[DigestPlatform]
    failed_platforms: list[str] = Field(default_factory=list)
    rerank: str | None = Field(
        default=None, description="how a comprehensive search was reranked, or why it was not"
    )
    queries: list[DigestQuery] = Field(
        default_factory=list, description="one fused list per query, once the search is over"
    )
    preview: DigestPreview | None = Field(
        default=None, description="while running: the results so far (None: none yet, or over)"
    )
    cost: Cost = Field(
        default_factory=Cost,
        description="the receipt: per platform calls and USD, total, the budget it ran under "
        "(so far, while it runs)",
    )
    timeline: Timeline = Field(
        default_factory=Timeline,
        description="where its time went, in seconds after it was started: per platform "
        "queued, started, first result, stages, finished; the fan-in and the finalization",
    )


def digest(view: TaskView) -> Digest:
    runs = [
        DigestPlatform(
            name=r.name,
            state=r.state,
            percent=platform_percent(r),
            message=r.message,
            error=r.error,
            answered_by=r.answered_by,
        )
        for r in view.platform_runs
    ]
    message = view.summary.message if view.summary else view.progress.message
    return Digest(
        task_id=view.task_id,
        status=view.status,
        percent=100.0 if view.status.terminal else view.progress.percent,
        message=message,
        platforms=runs,
        failed_platforms=[e.platform for e in view.errors],
        rerank=rerank_line(view.rerank) if view.rerank else None,
        queries=_queries(view) if view.status.terminal else [],
        preview=_preview(view),
        cost=view.cost,
        timeline=timeline.live(view, view.platform_runs),
    )


def _preview(view: TaskView) -> DigestPreview | None:
    p = view.preview
    if view.status.terminal or p is None:
        return None
    by_query = p.results_by_query or [QueryResults(query=view.queries[0], results=p.results)]
    queries = [
        DigestQuery(
            query=q.query,
            results=[_result(r) for r in q.results],
            failed=[f"{f.platform}: {f.error}" for f in q.failed],
        )
        for q in by_query
    ]
    return DigestPreview(platforms=p.platforms, queries=queries)


def _queries(view: TaskView) -> list[DigestQuery]:
    if view.results_by_query:
        return [
            DigestQuery(
                query=q.query,
                results=[_result(r) for r in q.results],
                failed=[f"{f.platform}: {f.error}" for f in q.failed],
            )
            for q in view.results_by_query
        ]
    failed = [f"{f.platform}: {f.error}" for r in view.platform_runs for f in r.failed_queries]
    query = view.queries[0] if view.queries else ""
    return [DigestQuery(query=query, results=[_result(r) for r in view.results], failed=failed)]


def _result(r: Result) -> DigestResult:
    return DigestResult(
        rank=r.rank,
        title=" ".join(r.title.split()) or r.url,
        url=r.url,
        snippet=snippet(r.snippet),
        platforms=r.platforms,
        score=round(r.score, 6),
        published_at=r.published_at,
        content=r.content,
    )


def markdown(d: Digest, with_timeline: bool = False) -> str:
    """Results per query and one status line; while running, the progress and what to call.
    `with_timeline` (get_search_status): the search's timeline after it (`timeline_markdown`)."""
    if d.status in (TaskStatus.PENDING, TaskStatus.RUNNING):
        text = progress_markdown(d)
    else:
        down = set(d.failed_platforms)  # on the status line already
        sections = [_section(i, q, down) for i, q in enumerate(d.queries, 1)]
        text = "\n\n---\n\n".join([*sections, status_line(d)])
    if with_timeline and (d.timeline.runs or d.timeline.finalized is not None):
        text += "\n\n" + timeline_markdown(d.timeline)
    return text


def _moment(label: str, value: float | None) -> list[str]:
    return [] if value is None else [f"{label} {value:.3f}"]


def timeline_markdown(kept: Timeline) -> str:
    """Where the search's time went, a line a platform (as `fanfuse trace` prints it): its
    moments, its stages' seconds, then the fan-in and the finalization. Bounded whatever the
    queries or results: a platform's line has a fixed set of fields, at most four stages."""
    lines = ["Timeline (seconds after the search started):"]
    for e in kept.runs:
        parts = [e.state]
        parts += _moment("queued", e.queued) + _moment("started", e.started)
        parts += _moment("working", e.working) + _moment("first result", e.first_result)
        parts += [f"{stage} {seconds:.3f}s" for stage, seconds in e.stages.items()]
        parts += _moment("finished", e.finished)
        if e.attempt > 1:
            parts.append(f"attempt {e.attempt}")
        parts.append(f"{e.calls} call{'s' if e.calls != 1 else ''}")
        lines.append(f"- {e.platform}: {', '.join(parts)}")
    ends = [e.finished for e in kept.runs if e.finished is not None]
    search = _moment("slowest platform ended", max(ends) if ends else None)
    search += _moment("fan-in", kept.fan_in) + _moment("finalized", kept.finalized)
    if kept.finalized is not None and kept.finalized_by is not None:
        search[-1] += f" by {kept.finalized_by}"
    if search:
        lines.append("- search: " + ", ".join(search))
    return "\n".join(lines)


def _section(number: int, q: DigestQuery, down: set[str]) -> str:
    lines = [f'## Query {number}: "{q.query}"', ""]
    if not q.results:
        lines.append("No results.")
    for r in q.results:
        lines.append(f"{r.rank}. **{r.title}**")
        lines.append(f"   {r.url}")
        if r.snippet and r.snippet != r.title:
            lines.append(f"   {r.snippet}")
        lines.append(f"   platforms: {', '.join(r.platforms)}")
        if r.content:
            lines.append("   content: " + snippet(r.content, CONTENT_CHARS))
    for failure in q.failed:
        if failure.partition(":")[0] not in down:
            lines.append(f"- failed on {snippet(failure, ERROR_CHARS)}")
    return "\n".join(lines)


def status_line(d: Digest) -> str:
    """`**partial**: <summary> Failed: web (HTTP 500 ...).` in one line."""
    line = f"**{d.status.value}**: {d.message}"
    failed = [p for p in d.platforms if p.name in d.failed_platforms]
    if failed:
        notes = ", ".join(f"{p.name} ({p.state.value}: {_error(p)})" for p in failed)
        line += f". Failed: {notes}"
    if d.rerank:
        line += f". {d.rerank[:1].upper()}{d.rerank[1:]}"
    receipt = cost_line(d.cost)
    if receipt is not None:
        line += f". {receipt[:1].upper()}{receipt[1:]}"
    return f"{line} (task_id {d.task_id})"


def _error(p: DigestPlatform) -> str:
    return snippet((p.error or "").removeprefix(f"{p.name}: "), ERROR_CHARS)


def progress_markdown(d: Digest) -> str:
    lines = [f"Search {d.task_id} is {d.status.value}: {d.percent:.0f}% - {d.message}"]
    lines += [f"- {p.name}: {p.state.value} {p.percent:.0f}% {p.message}" for p in d.platforms]
    if d.preview is not None:
        lines += ["", f"PREVIEW (partial, fused from {', '.join(d.preview.platforms)} so far):"]
        lines += [_section(i, q, set()) for i, q in enumerate(d.preview.queries, 1)]
        lines.append("")
    lines.append(
        f'Call get_search_status with task_id "{d.task_id}" for its results, '
        "or cancel_search to stop it."
    )
    return "\n".join(lines)
