"""Progress: per-platform percent, the overall formula, and the user-facing messages.

Overall percent is the mean of the platform percents; with platforms run one after another this
is the original `(completed x 100 + current) / total`. One platform keeps the plain stage names
and messages; several prefix them (`docs_searching`, `Platform 1/3 (docs): ...`).
"""

from __future__ import annotations

from collections.abc import Sequence

from fanfuse.wire.models import Counters, PlatformRun, PlatformState, Progress, Stage, Summary

STAGE_LABELS: dict[Stage, str] = {
    Stage.SEARCHING: "Searching",
    Stage.RESOLVING: "Resolving URLs",
    Stage.FETCHING_CONTENT: "Fetching content",
    Stage.COMPRESSING: "Compressing",
}


def stage_percent(stages: Sequence[Stage], stage: Stage, current: int, total: int) -> float:
    """Each planned stage is an equal share; within a stage, current/total of that share."""
    index = list(stages).index(stage)
    within = min(current / total, 1.0) if total > 0 else 0.0
    return round(100.0 * (index + within) / len(stages), 2)


def platform_percent(run: PlatformRun) -> float:
    if run.state.terminal:
        return 100.0
    if run.state is PlatformState.QUEUED:
        return 0.0
    return run.percent


def overall_percent(runs: Sequence[PlatformRun]) -> float:
    return mean_percent([platform_percent(r) for r in runs])


def mean_percent(percents: Sequence[float]) -> float:
    """The task percent: the one formula, over every platform's percent."""
    return round(sum(percents) / len(percents), 2) if percents else 0.0


def at_fan_in(done: int, n_platforms: int, ended: PlatformRun) -> Progress:
    """The task's stored progress when a platform ends: the fan-in transaction reads only that
    platform, so the ones still running count 0 % (a lower bound the live view refines)."""
    percents = [100.0] * done + [0.0] * (n_platforms - done)
    return Progress(percent=mean_percent(percents), stage=ended.stage, message=ended.message)


def stage_name(platform: str, stage: str, n_platforms: int) -> str:
    return stage if n_platforms == 1 else f"{platform}_{stage}"


def platform_message(index: int, n_platforms: int, platform: str, message: str) -> str:
    if n_platforms == 1:
        return message
    return f"Platform {index}/{n_platforms} ({platform}): {message}"


def stage_message(stage: Stage, detail: str) -> str:
    return f"{STAGE_LABELS[stage]}: {detail}"


def found_message(n_results: int) -> str:
    return stage_message(Stage.SEARCHING, f"Found {counted(n_results, 'result')}")


def counted(n: int, one: str, many: str | None = None) -> str:
    """`1 result`, `2 results`: messages are read by people."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def tally(runs: Sequence[PlatformRun]) -> Counters:
    """The counters `runs` make: an ended run is done, and failed unless it succeeded.

    `timed_out` and `cancelled` count as done and as failed like `failed` does, so the task's
    counters and the summary's "(N failed)" (both from here) always agree, whoever ended the
    runs: the fan-in, the deadline or a cancel.
    """
    ended = [r for r in runs if r.state.terminal]
    return Counters(
        done=len(ended), failed=sum(1 for r in ended if r.state is not PlatformState.SUCCEEDED)
    )


def add_ended(counters: Counters, ended: Sequence[PlatformRun]) -> Counters:
    """`counters` with the newly `ended` runs added (the fan-in counts one run at a time)."""
    more = tally(ended)
    return Counters(done=counters.done + more.done, failed=counters.failed + more.failed)


def summarize(runs: Sequence[PlatformRun], total_results: int) -> Summary:
    by_state = {s: sum(1 for r in runs if r.state is s) for s in PlatformState}
    failed = tally(runs).failed
    not_answered = by_state[PlatformState.FAILED] + by_state[PlatformState.SUSPENDED]
    succeeded = by_state[PlatformState.SUCCEEDED]
    if len(runs) == 1:
        run = runs[0]
        message = (
            f"Search completed: {counted(total_results, 'result')}"
            if run.state is PlatformState.SUCCEEDED
            else f"Search failed: {run.error or run.state.value}"
        )
    else:
        message = (
            f"Multi-platform search completed: {succeeded}/{len(runs)} platforms, "
            f"{total_results} total results ({failed} failed)"
        )
    failed_queries = sum(len(r.failed_queries) for r in runs if r.state is PlatformState.SUCCEEDED)
    if failed_queries:
        message += f"; {counted(failed_queries, 'query', 'queries')} failed on a platform"
    return Summary(
        platforms=len(runs),
        succeeded=succeeded,
        failed=not_answered,
        timed_out=by_state[PlatformState.TIMED_OUT],
        cancelled=by_state[PlatformState.CANCELLED],
        total_results=total_results,
        failed_queries=failed_queries,
        message=message,
    )


def queued(n_platforms: int) -> Progress:
    what = "1 platform" if n_platforms == 1 else f"{n_platforms} platforms"
    return Progress(percent=0.0, stage="queued", message=f"Queued: {what}")


def merged(runs: Sequence[PlatformRun], stored: Progress) -> Progress:
    """The live view of a running task: mean percent, the latest platform's stage and message."""
    active = [r for r in runs if r.state is not PlatformState.QUEUED]
    if not active:
        return stored
    latest = max(active, key=lambda r: r.updated_at)
    return Progress(percent=overall_percent(runs), stage=latest.stage, message=latest.message)
