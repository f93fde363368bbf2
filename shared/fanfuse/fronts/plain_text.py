"""Plain-text views of a search that the CLI and the MCP front both show: a snippet cut to a
hint, a platform's notes (filters, cache, caps, failed queries), the reranking line.

Here, not in the CLI's rendering, so the MCP front (`fanfuse.fronts.mcp`) and the command
(`fanfuse.cli`) say the same thing without one importing the other. Plain strings, no terminal
library: each front decides how to print them.
"""

from __future__ import annotations

from fanfuse.wire.cost import Cost, usd
from fanfuse.wire.models import CacheNote, CacheState, PlatformRun, RerankNote
from fanfuse.wire.options import Applied, CacheMode, OptionUse

SNIPPET_CHARS = 200
"""A snippet is a hint of the page, not the page: longer ones are cut (a URL never is)."""


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """`text` on one line, cut to `limit` characters (an ellipsis marks the cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def platform_notes(run: PlatformRun) -> list[str]:
    """What to know about one platform's results, one line each; none when there is nothing.

    `google: filtered include_domains -3 (post_filter), time_range native; cache hit (age 42s);
    capped page fetches at 66 (434 skipped)`, `google: query 2 failed: HTTP 500`, and for a
    fallback chain `google: answered by brave (google failed: HTTP 429...)`. A plain cache miss
    is not news and is left out.
    """
    parts = []
    if run.options:
        parts.append("filtered " + ", ".join(_option(n, u) for n, u in run.options.items()))
    cache = _cache(run.cache)
    if cache:
        parts.append(cache)
    parts += [
        f"capped {name.replace('_', ' ')} at {cut.cap} ({cut.skipped} skipped)"
        for name, cut in run.limits.items()
    ]
    lines = [f"{run.name}: {'; '.join(parts)}"] if parts else []
    lines += [
        f"{run.name}: query {f.query_index + 1} failed: {f.error}" for f in run.failed_queries
    ]
    chain = chain_note(run)
    return [*lines, chain] if chain else lines


CHAIN_REASON_CHARS = 80


def chain_note(run: PlatformRun) -> str | None:
    """`google: answered by brave (google failed: HTTP 429: ...)`: a fallback chain's members
    that did not answer, and why, each cut to CHAIN_REASON_CHARS; None without a chain, or when
    its first member answered alone."""
    others = [m for m in run.members if m.name not in run.answered_by]
    if not run.chain or (run.answered_by == [run.name] and not others):
        return None
    who = ", ".join(run.answered_by) or "no member"
    why = "; ".join(
        f"{m.name} {m.state.value}: {snippet(m.reason or '', CHAIN_REASON_CHARS)}" for m in others
    )
    return f"{run.name}: answered by {who}" + (f" ({why})" if why else "")


def rerank_line(note: RerankNote) -> str:
    """`reranked by llm (qwen-plus): 20 candidates` or `not reranked: <why>`."""
    if not note.applied:
        return f"not reranked ({note.method}): {note.error}"
    model = f" ({note.model})" if note.model else ""
    return f"reranked by {note.method}{model}: {note.candidates} candidates"


def cost_line(cost: Cost) -> str | None:
    """The receipt on one line: `cost $0.03: mid 1 call $0.02, cheap 1 call $0.01 (estimate
    $0.03; cap $0.035 from the request, trim: dropped dear; daily budget $5, $1.2 spent
    before)`; paid platforms dearest first, free ones left out. None for a search that could
    cost nothing (free platforms, no budget): a receipt of $0 is noise."""
    held = cost.budget
    if not (cost.total_usd or cost.estimate_usd or cost.trimmed) and (
        held.max_cost_usd is None and held.daily_budget_usd is None
    ):
        return None
    paid = sorted(
        ((n, p) for n, p in cost.platforms.items() if p.usd or p.calls),
        key=lambda item: (-item[1].usd, item[0]),
    )
    spent = ", ".join(
        f"{n} {p.calls} call{'s' if p.calls != 1 else ''} {usd(p.usd)}" for n, p in paid
    )
    notes = [f"estimate {usd(cost.estimate_usd)}"]
    if held.max_cost_usd is not None:
        cap = f"cap {usd(held.max_cost_usd)} from the {held.source or 'request'}"
        if cost.trimmed:
            cap += f", trim: dropped {', '.join(cost.trimmed)}"
        notes.append(cap)
    if held.daily_budget_usd is not None:
        before = held.daily_spent_usd
        notes.append(
            f"daily budget {usd(held.daily_budget_usd)}"
            + (f", {usd(before)} spent before" if before is not None else "")
        )
    head = f"cost {usd(cost.total_usd)}" + (f": {spent}" if spent else " (no paid call)")
    return f"{head} ({'; '.join(notes)})"


def _option(name: str, use: OptionUse) -> str:
    if use.applied is Applied.POST_FILTER:
        return f"{name} -{use.removed} (post_filter)"
    if use.applied is Applied.NATIVE:
        return f"{name} native"
    return f"{name} not applied"


def _cache(note: CacheNote | None) -> str | None:
    if note is None:
        return None
    age = f" (age {_age(note.age_s)})" if note.age_s is not None else ""
    if note.state is CacheState.HIT:
        return f"cache hit{age}"
    if note.state is CacheState.PARTIAL:
        return f"cache partial: {note.hits} hit, {note.misses} searched{age}"
    if note.mode is CacheMode.BYPASS:
        return "cache bypassed (entries refreshed)"
    if note.mode is CacheMode.ONLY:
        return "cache miss (cache only)"
    return None


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"
