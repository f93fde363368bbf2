"""The resolving stage: every hit's URL followed to the page it leads to (see content.resolve).

Failures (of any kind: `StageRun.each_hit`) keep the original URL, with the reason in
`metadata.resolve_error`, and are counted; they never fail the platform run.
A platform whose result URLs are redirects (Sogou's `/link?url=` for weixin) can only be
filtered by domain once they are resolved, so the domain post-filters run here for it, not in
the searching stage; the lists are ranked again after.
"""

from __future__ import annotations

from fanfuse.content.resolve import resolve_url
from fanfuse.rules import filters
from fanfuse.stages.searching import ranked
from fanfuse.stages.stage_run import StageRun
from fanfuse.wire.errors import ProviderError, Refused
from fanfuse.wire.models import Hit, Stage


def resolved_message(ok: int, total: int) -> str:
    return f"{ok}/{total} successful ({total - ok} failed)"


async def resolve(run: StageRun, hits: list[Hit]) -> list[Hit]:
    platform = run.platform

    async def follow(hit: Hit) -> Hit:
        url = await resolve_url(
            run.runner,
            f"{platform.name}/resolve",
            hit.url,
            run.content,
            run.calls,
            platform.resolve_target,
        )
        meta = {**hit.metadata}
        if url != hit.url:
            meta["redirected_from"] = hit.url
        return hit.model_copy(update={"url": url, "metadata": meta})

    resolved = await run.each_hit(
        Stage.RESOLVING,
        hits,
        range(len(hits)),
        follow,
        concurrency=run.content.concurrency,
        errors=(Refused, ProviderError, ValueError),
        error_key="resolve_error",
        unit="",
        summary=resolved_message,
    )
    return filter_domains(run, resolved)


def filter_domains(run: StageRun, hits: list[Hit]) -> list[Hit]:
    """The domain post-filters on resolved URLs, recorded with the run's other options."""
    _, domains = run.params.options.split_domains()
    if not domains.given():
        return hits
    lists: list[list[Hit]] = [[] for _ in run.params.queries]
    for hit in hits:
        lists[hit.query_index].append(hit)
    native = run.platform.native_options(run.params.options, run.ctx.settings)
    filtered = filters.post_filter(lists, domains, native, run.params.now)
    run.ctx.record.options = {**run.ctx.record.options, **filtered.uses}
    return ranked(filtered.lists, run.params.limit)
