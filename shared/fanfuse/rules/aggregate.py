"""The final document of a search: what the aggregator writes, as one pure function.

`lifecycle.finalize` calls it inside the finalization transaction, with the task and platform
documents that transaction read; nothing else builds a final status, summary or result list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from fanfuse.fusion import fuse as fusion
from fanfuse.fusion.rerank_contract import RerankOrder, apply_order
from fanfuse.rules import progress, provenance, spend
from fanfuse.wire.models import (
    PlatformError,
    PlatformRun,
    PlatformState,
    Preview,
    Progress,
    QueryResults,
    RerankNote,
    Result,
    Task,
    TaskStatus,
)
from fanfuse.wire.options import Applied

DEADLINE_ERROR = "no result before the deadline"


@dataclass(frozen=True)
class Final:
    """The finalized task and the platform runs the finalization ended (the stragglers)."""

    task: Task
    ended: list[PlatformRun]


def ended_run(
    run: PlatformRun, state: PlatformState, error: str | None, message: str, now: datetime
) -> PlatformRun:
    """`run` in its terminal `state`, with its progress complete and its message framed."""
    return run.model_copy(
        update={
            "state": state,
            "error": error,
            "percent": 100.0,
            "message": progress.platform_message(run.index, run.of, run.name, message),
            "finished_at": now,
            "updated_at": now,
        }
    )


def filtered_totals(runs: Sequence[PlatformRun]) -> dict[str, int]:
    """Per option, the results the post-filters removed over `runs` (options that removed none
    are listed too, at 0, so a reader sees the filter ran)."""
    totals: dict[str, int] = {}
    for run in runs:
        for name, use in run.options.items():
            if use.applied is not Applied.NOT_APPLIED:
                totals[name] = totals.get(name, 0) + use.removed
    return totals


def _fused(
    task: Task, succeeded: Sequence[PlatformRun], limit: int
) -> tuple[list[Result], list[QueryResults]]:
    return fusion.fuse_queries(
        task.queries,
        provenance.lists(succeeded),  # a chain's results as the members' that gave them
        task.fusion,
        limit,
        provenance.weights(task.request.weights, succeeded),
    )


def candidates(task: Task, runs: Sequence[PlatformRun]) -> list[QueryResults]:
    """Per query, the pool a reranker reorders: the succeeded runs fused at the mode's depth.

    The service reranks these outside the finalizing transaction (an LLM call must not hold
    one); `final_document` then fuses the same way and applies the orders it was given.
    """
    succeeded = [r for r in runs if r.state is PlatformState.SUCCEEDED]
    return _fused(task, succeeded, task.request.depth)[1]


def preview(task: Task, runs: Sequence[PlatformRun]) -> Preview | None:
    """The answer so far of a running search: `final_document`'s fusion over the runs that have
    succeeded, with the query failures they reported; None when the task is terminal (its final
    answer replaces the preview) or no run has succeeded yet (nothing to fuse, nothing done).

    Computed by whoever reads status, from the platform documents that read has: no store
    write, so a preview costs no Firestore write. A mode that reranks is previewed in its fused
    order (the reranker runs once, at the end), cut to `max_results` like the final answer.
    """
    if task.status.terminal:
        return None
    arrived = [r for r in runs if r.state is PlatformState.SUCCEEDED]
    if not arrived:
        return None
    results, by_query = _fused(task, arrived, task.request.max_results)
    for failure in (f for r in arrived for f in r.failed_queries):
        if 0 <= failure.query_index < len(by_query):
            by_query[failure.query_index].failed.append(failure)
    return Preview(
        results=results,
        results_by_query=by_query if len(task.queries) > 1 else [],
        platforms=[r.name for r in arrived],
    )


def _apply_reranks(
    task: Task,
    results: list[Result],
    by_query: list[QueryResults],
    reranked: Mapping[int, RerankOrder],
) -> tuple[list[Result], RerankNote]:
    """Each query's pool in its reranked order, cut to `max_results`. With several queries the
    combined list stays fused: no single query is the one to rerank it against."""
    limit = task.request.max_results
    for qi, query_results in enumerate(by_query):
        plan = reranked.get(qi)
        order = plan.order if plan is not None else []
        query_results.results = apply_order(query_results.results, order, limit)
    results = by_query[0].results if len(by_query) == 1 else results[:limit]
    notes = [reranked[qi].note for qi in sorted(reranked)]
    failed = [n for n in notes if not n.applied]
    if not notes:
        return results, RerankNote(method="none", applied=False, error="no reranker ran")
    note = failed[0] if failed else notes[0]
    return results, note.model_copy(update={"candidates": sum(n.candidates for n in notes)})


def final_document(
    task: Task,
    runs: Sequence[PlatformRun],
    now: datetime,
    reranked: Mapping[int, RerankOrder] | None = None,
) -> Final:
    """Fuse the succeeded platforms' results, rank, limit, and set the final status.

    Platforms still running become `timed_out`. `completed` when every platform succeeded with
    every query, `partial` when some platform or some query of one failed, `failed` (with every
    platform's error) when no platform succeeded. A query that failed on a platform is listed
    with its query in `results_by_query`; what the post-filters removed is added up per option
    in `filtered`. A mode that reranks fuses its deeper pool and applies `reranked` (query
    index -> order, from `candidates`), and the note says how.
    """
    ended = [
        ended_run(r, PlatformState.TIMED_OUT, DEADLINE_ERROR, "Timed out", now)
        for r in runs
        if not r.state.terminal
    ]
    final_runs = [next((e for e in ended if e.name == r.name), r) for r in runs]
    succeeded = [r for r in final_runs if r.state is PlatformState.SUCCEEDED]
    note = None
    if task.request.reranks:
        results, by_query = _fused(task, succeeded, task.request.depth)
        results, note = _apply_reranks(task, results, by_query, reranked or {})
    else:
        results, by_query = _fused(task, succeeded, task.request.max_results)
    summary = progress.summarize(final_runs, len(results))
    errors = [
        PlatformError(platform=r.name, state=r.state, error=r.error or r.state.value)
        for r in final_runs
        if r.state is not PlatformState.SUCCEEDED
    ]
    failed_queries = [f for r in succeeded for f in r.failed_queries]
    for failure in failed_queries:
        if 0 <= failure.query_index < len(by_query):
            by_query[failure.query_index].failed.append(failure)
    if not succeeded:
        status = TaskStatus.FAILED
    elif errors or failed_queries:
        status = TaskStatus.PARTIAL
    else:
        status = TaskStatus.COMPLETED
    error = None
    if status is TaskStatus.FAILED:
        error = f"All {len(final_runs)} platforms failed: " + "; ".join(
            f"{e.platform}: {e.error}" for e in errors
        )
    final = task.model_copy(
        update={
            "status": status,
            "summary": summary,
            "counters": progress.tally(final_runs),
            "errors": errors,
            "error": error,
            "results": results,
            "results_by_query": by_query if len(task.queries) > 1 else [],
            "filtered": filtered_totals(succeeded),
            "rerank": note,
            "cost": spend.receipt(task.cost, final_runs),
            "progress": Progress(percent=100.0, stage=status.value, message=summary.message),
            "updated_at": now,
            "finalized_at": now,
        }
    )
    return Final(task=final, ended=ended)
