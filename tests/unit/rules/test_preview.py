"""The preview of a running search (rules.aggregate.preview): the final answer's fusion over the
runs that have succeeded so far, and nothing once the task is terminal."""

from __future__ import annotations

import io
from datetime import timedelta

from rich.console import Console

from fanfuse.cli.search_view import PREVIEW_ROWS, ProgressView, preview_lines, progress_bars
from fanfuse.rules import aggregate
from fanfuse.wire.models import (
    Hit,
    PlatformRun,
    PlatformState,
    QueryFailure,
    SearchRequest,
    Task,
    TaskStatus,
    TaskView,
    utcnow,
)
from tests.support.fakes import hits

NAMES = ["a", "b", "c"]


def _task(queries: list[str]) -> Task:
    now = utcnow()
    request = SearchRequest.model_validate(
        {"query": queries, "platform": NAMES, "mode": "balanced", "max_results": 5}
    )
    return Task(
        task_id="t",
        request=request,
        queries=request.queries,
        platforms=NAMES,
        fusion=request.fusion or "rrf",
        deadline_at=now + timedelta(seconds=30),
        expires_at=now + timedelta(minutes=5),
    )


def _run(name: str, state: PlatformState, queries: int = 1) -> PlatformRun:
    found: list[Hit] = []
    for qi in range(queries):
        found += [h.model_copy(update={"query_index": qi}) for h in hits(f"{name}{qi}", 4)]
        found += [h.model_copy(update={"query_index": qi}) for h in hits(f"shared{qi}", 2)]
    ranked = [h.model_copy(update={"rank": r}) for r, h in enumerate(found, 1)]
    done = state is PlatformState.SUCCEEDED
    index = NAMES.index(name) + 1
    return PlatformRun(
        task_id="t", name=name, index=index, of=3, state=state, results=ranked if done else []
    )


def test_nothing_arrived_gives_no_preview() -> None:
    task = _task(["q"])
    runs = [_run(n, PlatformState.RUNNING) for n in NAMES]
    assert aggregate.preview(task, runs) is None


def test_the_preview_fuses_the_succeeded_runs_as_the_final_answer_would() -> None:
    task = _task(["q"])
    runs = [
        _run("a", PlatformState.SUCCEEDED),
        _run("b", PlatformState.RUNNING),
        _run("c", PlatformState.FAILED),
    ]
    preview = aggregate.preview(task, runs)
    assert preview is not None and preview.partial is True
    assert preview.platforms == ["a"]
    both = [_run("a", PlatformState.SUCCEEDED), _run("b", PlatformState.SUCCEEDED)]
    later = aggregate.preview(task, [*both, runs[2]])
    final = aggregate.final_document(task, [*both, runs[2]], utcnow()).task
    assert later is not None and later.platforms == ["a", "b"]
    assert [r.url for r in later.results] == [r.url for r in final.results]
    assert [r.platforms for r in later.results] == [r.platforms for r in final.results]
    assert len(later.results) == task.request.max_results


def test_several_queries_are_previewed_per_query_with_their_failures() -> None:
    task = _task(["q0", "q1"])
    failure = QueryFailure(platform="a", query_index=1, query="q1", error="HTTP 500")
    a = _run("a", PlatformState.SUCCEEDED, 2).model_copy(update={"failed_queries": [failure]})
    preview = aggregate.preview(task, [a, _run("b", PlatformState.RUNNING, 2)])
    assert preview is not None
    assert [q.query for q in preview.results_by_query] == ["q0", "q1"]
    assert preview.results_by_query[1].failed == [failure]
    assert all(q.results for q in preview.results_by_query)


def test_a_terminal_task_has_no_preview() -> None:
    task = _task(["q"]).model_copy(update={"status": TaskStatus.PARTIAL})
    assert aggregate.preview(task, [_run("a", PlatformState.SUCCEEDED)]) is None


def test_the_cli_shows_the_top_of_the_preview_under_the_bars_until_the_end() -> None:
    task = _task(["q"])
    runs = [_run("a", PlatformState.SUCCEEDED), _run("b", PlatformState.RUNNING)]
    view = TaskView.model_validate(
        {**dict(task), "platform_runs": runs, "preview": aggregate.preview(task, runs)}
    )
    bars = progress_bars(True)
    ProgressView(bars)(view)
    console = Console(file=io.StringIO(), width=100, record=True)
    for renderable in bars.get_renderables():
        console.print(renderable)
    shown = console.export_text()
    assert "preview (partial, from a):" in shown
    assert view.preview is not None
    titles = [" ".join(r.title.split()) for r in view.preview.results[:PREVIEW_ROWS]]
    assert all(t in shown for t in titles) and len(titles) == PREVIEW_ROWS
    over = view.model_copy(update={"status": TaskStatus.COMPLETED})
    ProgressView(bars)(over)
    assert bars.preview is None and preview_lines(over) is None
