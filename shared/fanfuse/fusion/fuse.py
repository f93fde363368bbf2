"""From per-platform hit lists to one ranked, deduplicated result list.

Deduplication comes first (dedup.py): hits with one canonical URL (urls.py) are one page, and
near-duplicate pages of one site are one cluster. The fusers then rank clusters, so a cluster
gets the combined evidence of all its URLs: each list counts a cluster once, at the best rank
it gave any of the cluster's hits. Every result keeps every source: its platforms, each
platform's rank, and every URL variant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fanfuse.fusion import fusers
from fanfuse.fusion.dedup import Deduped, dedupe
from fanfuse.fusion.fusers import Fuser
from fanfuse.fusion.urls import TRACKING_PARAMS, canonical_url, clean_url, content_id
from fanfuse.wire.models import FusionMethod, Hit, QueryResults, Result

__all__ = [
    "TRACKING_PARAMS",
    "PlatformLists",
    "canonical_url",
    "clean_url",
    "content_id",
    "fuse",
    "fuse_queries",
    "fuse_with",
]

PlatformLists = Mapping[str, Sequence[Hit]]
"""platform name -> its ranked hits for one query (platforms in request order)."""


def _by_rank(hits: Sequence[Hit]) -> list[int]:
    """Positions of a list's hits, best rank first (a stable sort: equal ranks keep list order)."""
    return sorted(range(len(hits)), key=lambda i: hits[i].rank or 0)


def _run(hits: Sequence[Hit], ids: Sequence[str]) -> list[tuple[str, float | None]]:
    """A platform's list as (cluster id, score), the best-ranked hit of each cluster kept."""
    seen: set[str] = set()
    run: list[tuple[str, float | None]] = []
    for i in _by_rank(hits):
        if ids[i] not in seen:
            seen.add(ids[i])
            run.append((ids[i], hits[i].score))
    return run


def _fuse(
    lists: Mapping[str, Sequence[Hit]],
    owner: Mapping[str, str],
    method: FusionMethod | Fuser,
    limit: int,
    weights: Mapping[str, float] | None,
) -> list[Result]:
    deduped = dedupe(lists, owner)
    if method is FusionMethod.CONCAT:
        return _concat(lists, deduped, limit)
    fuser = fusers.FUSERS[method] if isinstance(method, FusionMethod) else method
    runs = {key: _run(hits, deduped.ids[key]) for key, hits in lists.items()}
    run_weights = {key: (weights or {}).get(owner[key], 1.0) for key in lists}
    scored = fuser(runs, weights=run_weights)
    clusters = deduped.clusters
    return [clusters[cid].result(i, score) for i, (cid, score) in enumerate(scored[:limit], 1)]


def _concat(lists: Mapping[str, Sequence[Hit]], deduped: Deduped, limit: int) -> list[Result]:
    """The original behaviour: quota `limit // n` each, the remainder to the last list."""
    keys = list(lists)
    quota, extra = divmod(limit, len(keys)) if keys else (0, 0)
    taken: list[str] = []
    for i, run_key in enumerate(keys):
        allowed = quota + (extra if i == len(keys) - 1 else 0)
        count = 0
        ids = deduped.ids[run_key]
        for position in _by_rank(lists[run_key]):
            if count >= allowed:
                break
            if ids[position] not in taken:
                taken.append(ids[position])
                count += 1
    return [deduped.clusters[cid].result(i, 1.0 / i) for i, cid in enumerate(taken, 1)]


def fuse(
    per_platform: PlatformLists,
    method: FusionMethod,
    limit: int,
    weights: Mapping[str, float] | None = None,
) -> list[Result]:
    """One query: fuse each platform's ranked list into at most `limit` results."""
    return _fuse(per_platform, {p: p for p in per_platform}, method, limit, weights)


def fuse_with(
    per_platform: PlatformLists,
    fuser: Fuser,
    limit: int,
    weights: Mapping[str, float] | None = None,
) -> list[Result]:
    """`fuse` with any fuser, so that `fanfuse eval` scores fusers.VARIANTS on the same path."""
    return _fuse(per_platform, {p: p for p in per_platform}, fuser, limit, weights)


def fuse_queries(
    queries: Sequence[str],
    per_platform: Mapping[str, Sequence[Hit]],
    method: FusionMethod,
    limit: int,
    weights: Mapping[str, float] | None = None,
) -> tuple[list[Result], list[QueryResults]]:
    """Several queries: one fused list per query, and every (platform, query) list fused in one.

    `per_platform` holds each platform's hits for all queries, told apart by `Hit.query_index`.
    """
    by_query: list[QueryResults] = []
    all_lists: dict[str, list[Hit]] = {}
    owner: dict[str, str] = {}
    for qi, query in enumerate(queries):
        lists = {p: [h for h in hits if h.query_index == qi] for p, hits in per_platform.items()}
        by_query.append(QueryResults(query=query, results=fuse(lists, method, limit, weights)))
        for platform, hits in lists.items():
            all_lists[f"{platform}#{qi}"] = hits
            owner[f"{platform}#{qi}"] = platform
    combined = _fuse(all_lists, owner, method, limit, weights)
    return combined, by_query
