"""From per-platform hit lists to one ranked, deduplicated result list.

Two hits with the same canonical URL (urls.canonical_url) are one result that keeps every source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fanfuse import fusers
from fanfuse.models import FusionMethod, Hit, QueryResults, Result
from fanfuse.urls import TRACKING_PARAMS, canonical_url, clean_url, content_id

__all__ = [
    "TRACKING_PARAMS",
    "PlatformLists",
    "canonical_url",
    "clean_url",
    "content_id",
    "fuse",
    "fuse_queries",
]


@dataclass
class _Merged:
    """One canonical URL and everything the platforms said about it."""

    key: str
    first: Hit
    platform: str
    platforms: list[str] = field(default_factory=list)
    ranks: dict[str, int] = field(default_factory=dict)
    title: str = ""
    snippet: str = ""
    content: str | None = None
    content_id: str | None = None

    def add(self, platform: str, hit: Hit) -> None:
        if platform not in self.platforms:
            self.platforms.append(platform)
        if hit.rank and (platform not in self.ranks or hit.rank < self.ranks[platform]):
            self.ranks[platform] = hit.rank
        if len(hit.title) > len(self.title):
            self.title = hit.title
        if len(hit.snippet) > len(self.snippet):
            self.snippet = hit.snippet
        if hit.content and len(hit.content) > len(self.content or ""):
            self.content = hit.content
        if hit.content_id and not self.content_id:
            self.content_id = hit.content_id

    def result(self, rank: int, score: float) -> Result:
        hit = self.first
        return Result(
            rank=rank,
            score=round(score, 10),
            platform=self.platform,
            platforms=list(self.platforms),
            ranks=dict(self.ranks),
            title=self.title,
            url=hit.url,
            snippet=self.snippet,
            content=self.content,
            content_id=self.content_id or (content_id(hit.url) if self.content else None),
            published_at=hit.published_at,
            language=hit.language,
            retrieved_at=hit.retrieved_at,
            metadata={**hit.metadata, "canonical_url": self.key},
        )


PlatformLists = Mapping[str, Sequence[Hit]]
"""platform name -> its ranked hits for one query (platforms in request order)."""


def _merge(lists: Mapping[str, Sequence[Hit]], owner: Mapping[str, str]) -> dict[str, _Merged]:
    merged: dict[str, _Merged] = {}
    for run_key, hits in lists.items():
        platform = owner[run_key]
        for hit in hits:
            key = canonical_url(hit.url)
            if key not in merged:
                merged[key] = _Merged(key=key, first=hit, platform=platform)
            merged[key].add(platform, hit)
    return merged


def _ranked_ids(hits: Sequence[Hit]) -> list[tuple[str, float | None]]:
    """A platform's list as (canonical id, score), first occurrence of each id kept."""
    seen: set[str] = set()
    run: list[tuple[str, float | None]] = []
    for hit in sorted(hits, key=lambda h: h.rank or 0):
        key = canonical_url(hit.url)
        if key not in seen:
            seen.add(key)
            run.append((key, hit.score))
    return run


def _fuse(
    lists: Mapping[str, Sequence[Hit]],
    owner: Mapping[str, str],
    method: FusionMethod,
    limit: int,
    weights: Mapping[str, float] | None,
) -> list[Result]:
    merged = _merge(lists, owner)
    if method is FusionMethod.CONCAT:
        return _concat(lists, owner, merged, limit)
    runs = {key: _ranked_ids(hits) for key, hits in lists.items()}
    run_weights = {key: (weights or {}).get(owner[key], 1.0) for key in lists}
    scored = fusers.FUSERS[method](runs, weights=run_weights)
    return [merged[key].result(i, score) for i, (key, score) in enumerate(scored[:limit], 1)]


def _concat(
    lists: Mapping[str, Sequence[Hit]],
    owner: Mapping[str, str],
    merged: Mapping[str, _Merged],
    limit: int,
) -> list[Result]:
    """The original behaviour: quota `limit // n` each, the remainder to the last list."""
    keys = list(lists)
    quota, extra = divmod(limit, len(keys)) if keys else (0, 0)
    taken: list[str] = []
    for i, run_key in enumerate(keys):
        allowed = quota + (extra if i == len(keys) - 1 else 0)
        count = 0
        for hit in sorted(lists[run_key], key=lambda h: h.rank or 0):
            if count >= allowed:
                break
            key = canonical_url(hit.url)
            if key not in taken:
                taken.append(key)
                count += 1
    return [merged[key].result(i, 1.0 / i) for i, key in enumerate(taken, 1)]


def fuse(
    per_platform: PlatformLists,
    method: FusionMethod,
    limit: int,
    weights: Mapping[str, float] | None = None,
) -> list[Result]:
    """One query: fuse each platform's ranked list into at most `limit` results."""
    return _fuse(per_platform, {p: p for p in per_platform}, method, limit, weights)


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
