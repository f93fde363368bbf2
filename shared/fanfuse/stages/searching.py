"""The searching stage: the cache, the platform's queries one by one, the post-filters, ranks.

Queries succeed or fail one by one: a query whose provider call fails is listed on the platform
document (`failed_queries`) and the platform succeeds with the others; it fails only when every
query did. A platform that takes all queries in one call (`multi_query`) is asked once, and
only when that call fails is it asked again query by query, so one bad query cannot sink the
rest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from fanfuse.platforms.contract import SearchParams
from fanfuse.rules import filters, progress
from fanfuse.rules.breaker import run_kind
from fanfuse.rules.timeline import FIRST_RESULT
from fanfuse.stages.stage_run import StageRun
from fanfuse.wire.errors import ProviderError, unwrap_group_error
from fanfuse.wire.models import CacheNote, CacheState, FailureKind, Hit, QueryFailure, Stage
from fanfuse.wire.options import CacheMode

NOT_CACHED = "not cached"

Answer = list[Hit] | ProviderError
"""One query's answer: its hits, or why it failed."""


async def search(run: StageRun, hits: list[Hit]) -> list[Hit]:
    """Always the first stage (`hits` is empty); the claim already reported its start."""
    began = time.monotonic()  # the timeline's first result counts from here
    queries = run.params.queries
    answers: list[Answer | None] = [None] * len(queries)
    ages: list[float] = []
    if run.cache is not None:
        for qi, query in enumerate(queries):
            cached = run.cache.lookup(query)
            if cached is not None:
                answers[qi] = cached.hits
                ages.append(cached.age_s)
                _first_result(run, cached.hits, began)
                run.ctx.record.provider = run.ctx.record.provider or cached.provider
    missing = [qi for qi, answer in enumerate(answers) if answer is None]
    if missing and run.cache is not None and run.cache.mode is CacheMode.ONLY:
        for qi in missing:
            answers[qi] = ProviderError(run.platform.name, NOT_CACHED, FailureKind.NOT_ASKED)
    elif missing:
        fresh = await _ask(run, [queries[qi] for qi in missing], began)
        for qi, answer in zip(missing, fresh, strict=True):
            answers[qi] = answer
            if (
                run.cache is not None
                and not isinstance(answer, ProviderError)
                and not run.ctx.record.provisional
            ):
                run.cache.save(queries[qi], answer, run.ctx.record.provider)
    if run.cache is not None:
        run.ctx.record.cache = _note(run.cache.mode, len(queries), ages)
    lists = _lists(run, answers)
    options = run.params.options
    if run.platform.capabilities.resolves_urls:  # its URLs are redirects: see resolving.py
        options, _ = options.split_domains()
    native = run.platform.native_options(run.params.options, run.ctx.settings)
    filtered = filters.post_filter(lists, options, native, run.params.now)
    run.ctx.record.options = filtered.uses
    found = ranked(filtered.lists, run.params.limit)
    if run.reporter.stages[-1] is Stage.SEARCHING:  # the fan-in writes it with the run's end
        run.reporter.message = progress.found_message(len(found))
    else:
        run.reporter.done(f"Found {len(found)} results", len(found))
    return found


def _lists(run: StageRun, answers: list[Answer | None]) -> list[list[Hit]]:
    """The hit lists, failed queries recorded; raises when no query succeeded."""
    queries = run.params.queries
    failures = [
        QueryFailure(
            platform=run.platform.name,
            query_index=qi,
            query=queries[qi],
            error=answer.message,
            kind=answer.fault,
        )
        for qi, answer in enumerate(answers)
        if isinstance(answer, ProviderError)
    ]
    run.ctx.record.failed_queries = failures
    if len(failures) == len(queries):
        errors = [a for a in answers if isinstance(a, ProviderError)]
        kind = run_kind([e.fault for e in errors])  # whose failure the run's is, for its breaker
        if len(queries) == 1 or len({e.message for e in errors}) == 1:
            errors[0].kind = kind
            raise errors[0]
        detail = "; ".join(f"query {f.query_index + 1}: {f.error}" for f in failures)
        message = f"all {len(queries)} queries failed: {detail}"
        raise ProviderError(run.platform.name, message, kind)
    return [answer if isinstance(answer, list) else [] for answer in answers]


def _first_result(run: StageRun, answer: Answer, began: float) -> None:
    """The first answer with results, in `timings` (the timeline's `first_result`)."""
    if isinstance(answer, list) and answer:
        run.ctx.record.timings.setdefault(FIRST_RESULT, round(time.monotonic() - began, 4))


async def _ask(run: StageRun, queries: list[str], began: float) -> list[Answer]:
    """The platform's answer to each query; a multi-query platform is asked once first."""
    if run.platform.capabilities.multi_query:
        try:
            answers: list[Answer] = list(await run.platform.search(run.ctx, _with(run, queries)))
            for answer in answers:
                _first_result(run, answer, began)
            return answers
        except ProviderError as exc:
            if len(queries) == 1:
                return [exc]
    quiet = dataclasses.replace(run.ctx, report=lambda *_: None)
    done = 0

    async def one(query: str) -> Answer:
        nonlocal done
        try:
            answer: Answer = (await run.platform.search(quiet, _with(run, [query])))[0]
        except ProviderError as exc:
            answer = exc
        _first_result(run, answer, began)
        done += 1
        if len(queries) > 1:
            run.reporter.step(done, len(queries), f"{done}/{len(queries)} queries")
        return answer

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(q)) for q in queries]
    except BaseExceptionGroup as group_error:  # a platform's bug, not a provider's answer
        raise unwrap_group_error(group_error) from None
    return [task.result() for task in tasks]


def _with(run: StageRun, queries: list[str]) -> SearchParams:
    return run.params.model_copy(update={"queries": queries})


def _note(mode: CacheMode, total: int, ages: list[float]) -> CacheNote:
    hits = len(ages)
    state = (
        CacheState.HIT if hits == total else CacheState.MISS if hits == 0 else CacheState.PARTIAL
    )
    return CacheNote(
        state=state, mode=mode, age_s=max(ages) if ages else None, hits=hits, misses=total - hits
    )


def ranked(lists: list[list[Hit]], limit: int) -> list[Hit]:
    """Number each query's list 1..n (the platform's order) and tag it with its query."""
    hits: list[Hit] = []
    for qi, items in enumerate(lists):
        for rank, hit in enumerate(items[:limit], 1):
            hits.append(hit.model_copy(update={"query_index": qi, "rank": rank}))
    return hits
