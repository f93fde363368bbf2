"""Which hits are one result, and what that one result says: exact and near-duplicate merging.

Pages. Hits whose canonical URLs are equal (`urls.canonical_url`: tracking, fragment, http/https
and a leading `www.`/`m.` folded) are one page.

Near duplicates. Two pages on one registered domain (`urls.registered_domain`, from the Public
Suffix List) are one result when `similarity` of their texts is at least
NEAR_DUPLICATE_THRESHOLD: the same article syndicated under two paths, AMP and canonical pages,
print views, parameters that canonicalization cannot know (`?smid=share`, `?page=1`), mobile
paths and hosts (`/mobil/...`, `en.m.wikipedia.org`), version suffixes (`arxiv.org/abs/X` and
`.../Xv7`). The similarity of two pages is

    0 when their titles carry different numbers on both sides ("Part 1"/"Part 2", "Gen 11"/
      "Gen 12", "3.11"/"3.12"): a number that changes names another item;
    else min(containment of their title words, containment of their snippets' 3-word shingles),

where containment(A, B) = |A & B| / min(|A|, |B|), words lower-cased `\\w+` tokens. Containment
rather than Jaccard because platforms cut one page's snippet at different lengths and drop or
keep the site's name in its title: the shorter text is contained in the longer, whatever its
length. Titles and snippets must both agree: boilerplate snippets (a docs site's description on
every page) have different titles, and a series' parts have different snippets. Containment
has one weakness, a short text inside a long one, so two pages never merge this way when
either has no title, either snippet has fewer than 10 words, or one snippet has fewer than half
the other's shingles (snippets cut by platforms keep at least 73% in the fixtures below).

The threshold, measured on tests/fixtures/near_duplicates.json (12 pairs of one page under two
URLs, 13 pairs of different pages on one domain that look alike; tests/unit/fusion/test_dedup.py
checks these numbers): one page scores at least 0.857 (the arXiv version suffix: 6 of 7 title
words), 1.0 for the 11 others; different pages at most 0.750 (two docs pages with the site's
boilerplate snippet, two GitHub pages with the repository's: 3 of 4 title words). 0.8 sits
between. Without the number rule, two lectures of one course whose snippet is the course's
description would score 0.833 and merge. Token-set Jaccard does not separate the two sets at
any threshold: over title and snippet words, one page scores as low as 0.79 (a snippet cut
short) and different pages as high as 0.93; the min of title and snippet Jaccard gives 0.54
against 0.82. The length rules come from the Vaswani collection, records known to be distinct:
in the BM25 top 100 of its 93 queries, containment alone merged 45 pairs of records, mostly a
title-only record inside a full abstract; with the rules 11 remain, 4 of them verbatim copies
and the others records that repeat another's title (a "discussion on" note, appendices, one
title with and without its abstract), which no text measure can tell apart.

Clusters. Pages are taken in the order first seen (platforms in request order, each list in its
order); a page joins the first earlier cluster on its registered domain whose representative
(that cluster's first page) is similar enough, else starts a cluster. Comparing with the
representative only, never with any member, keeps a chain of small differences from merging
pages that are not alike; comparing only within a domain keeps the cost O(n^2) per domain.
Hosts with no registered domain never merge this way: IP addresses, `localhost`, and the offline
corpora's `https://<corpus>.local/doc/<id>`, whose documents are distinct by id: the qrels that
`fanfuse eval` scores against judge each id, so merging such records lowers every fuser (tried:
rrf nDCG@10 0.4894 -> 0.4883).

Merge rules (one cluster, one Result; every tie broken by the order first seen):
- url: among the clean forms (`urls.clean_url`) of the URLs the platforms gave for the
  representative page: https before http, a host without `m.` before one with it, then the one
  most platforms gave, then the first seen. Never a URL no platform gave.
- variants: every raw URL of every page of the cluster, first seen first, with its platforms.
- title: majority vote of the platforms (each votes with the title of its first hit in the
  cluster), ties broken by the longest title, then the first seen.
- snippet: the longest; content: the longest, with its own content id.
- published_at: the earliest given; language: the first given; ranks: each platform's best.
- platform, retrieved_at, metadata: from the first hit; metadata["canonical_url"] is the
  cluster's id (its representative's canonical URL); metadata["near_duplicates"] counts the pages
  merged into it by similarity, when there are any.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, TypeVar
from urllib.parse import urlsplit

from fanfuse.fusion.urls import (
    canonical_url,
    clean_url,
    content_id,
    is_mobile_host,
    registered_domain,
)
from fanfuse.wire.models import Hit, Result, UrlVariant, as_utc

NEAR_DUPLICATE_THRESHOLD = 0.8
"""Minimum `similarity` for two pages of one registered domain to merge (see the docstring)."""

SHINGLE_WORDS = 3
MIN_SNIPPET_WORDS = 10
MIN_SNIPPET_RATIO = 0.5
"""Snippets too short, or one under half the other's shingles, never merge (see the docstring)."""

_WORD = re.compile(r"\w+")
T = TypeVar("T")


@dataclass(frozen=True)
class Seen:
    """One hit, the platform that gave it, and its place in the order the hits were seen."""

    order: int
    platform: str
    hit: Hit


@dataclass(frozen=True)
class Text:
    """What near-duplicate detection compares of a page."""

    title_words: frozenset[str]
    title_numbers: frozenset[str]
    shingles: frozenset[tuple[str, ...]]
    snippet_words: int


def text_of(title: str, snippet: str) -> Text:
    """Computed once per page, so a domain's O(n^2) comparisons only intersect sets."""
    words = _WORD.findall(title.lower())
    snippet_words = _WORD.findall(snippet.lower())
    shingles = {
        tuple(snippet_words[i : i + SHINGLE_WORDS])
        for i in range(len(snippet_words) - SHINGLE_WORDS + 1)
    }
    return Text(
        title_words=frozenset(words),
        title_numbers=frozenset(w for w in words if w.isdigit()),
        shingles=frozenset(shingles),
        snippet_words=len(snippet_words),
    )


def _containment(a: frozenset[T], b: frozenset[T]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def similarity(a: Text, b: Text) -> float:
    """How alike two pages' texts are, 0 to 1 (the formula is in the module docstring)."""
    if a.title_numbers - b.title_numbers and b.title_numbers - a.title_numbers:
        return 0.0
    if min(a.snippet_words, b.snippet_words) < MIN_SNIPPET_WORDS:
        return 0.0
    shorter, longer = sorted((len(a.shingles), len(b.shingles)))
    if shorter < MIN_SNIPPET_RATIO * longer:
        return 0.0
    return min(_containment(a.title_words, b.title_words), _containment(a.shingles, b.shingles))


def majority_title(seen: Sequence[Seen]) -> str:
    """Each platform votes with its first non-empty title; most votes, then longest, then first."""
    votes: dict[str, str] = {}
    for s in seen:
        if s.hit.title and s.platform not in votes:
            votes[s.platform] = s.hit.title
    counts = Counter(votes.values())
    first: dict[str, int] = {}
    for i, title in enumerate(votes.values()):
        first.setdefault(title, i)
    return min(counts, key=lambda t: (-counts[t], -len(t), first[t]), default="")


def display_url(seen: Sequence[Seen]) -> str:
    """The cleanest URL given for one page (preference order in the module docstring)."""
    given: dict[str, list[str]] = {}
    for s in seen:
        platforms = given.setdefault(clean_url(s.hit.url), [])
        if s.platform not in platforms:
            platforms.append(s.platform)
    order = {url: i for i, url in enumerate(given)}
    return min(
        given,
        key=lambda url: (
            urlsplit(url).scheme != "https",
            is_mobile_host(url),
            -len(given[url]),
            order[url],
        ),
    )


def url_variants(seen: Sequence[Seen]) -> list[UrlVariant]:
    """Every raw URL, first seen first, with the platforms that gave it."""
    given: dict[str, list[str]] = {}
    for s in seen:
        platforms = given.setdefault(s.hit.url, [])
        if s.platform not in platforms:
            platforms.append(s.platform)
    return [UrlVariant(url=url, platforms=platforms) for url, platforms in given.items()]


def earliest(dates: Iterable[datetime | None]) -> datetime | None:
    return min((d for d in dates if d is not None), key=as_utc, default=None)


@dataclass
class Page:
    """Every hit whose URL has one canonical URL, in the order seen."""

    key: str
    seen: list[Seen] = field(default_factory=list)

    @cached_property
    def text(self) -> Text:
        snippet = max((s.hit.snippet for s in self.seen), key=len, default="")
        return text_of(majority_title(self.seen), snippet)


@dataclass
class Cluster:
    """One result: its representative page first, then the near duplicates merged into it."""

    pages: list[Page] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.pages[0].key

    @property
    def seen(self) -> list[Seen]:
        return sorted((s for page in self.pages for s in page.seen), key=lambda s: s.order)

    def result(self, rank: int, score: float) -> Result:
        seen = self.seen
        first = seen[0]
        platforms = list(dict.fromkeys(s.platform for s in seen))
        ranks: dict[str, int] = {}
        for s in seen:
            if s.hit.rank and (s.platform not in ranks or s.hit.rank < ranks[s.platform]):
                ranks[s.platform] = s.hit.rank
        with_content = [s.hit for s in seen if s.hit.content]
        content: str | None
        cid: str | None
        if with_content:
            richest = max(with_content, key=lambda h: len(h.content or ""))
            content, cid = richest.content, richest.content_id or content_id(richest.url)
        else:
            content, cid = None, next((s.hit.content_id for s in seen if s.hit.content_id), None)
        metadata: dict[str, Any] = {**first.hit.metadata, "canonical_url": self.id}
        if len(self.pages) > 1:
            metadata["near_duplicates"] = len(self.pages) - 1
        return Result(
            rank=rank,
            score=round(score, 10),
            platform=first.platform,
            platforms=platforms,
            ranks=ranks,
            title=majority_title(seen),
            url=display_url(self.pages[0].seen),
            variants=url_variants(seen),
            snippet=max((s.hit.snippet for s in seen), key=len),
            content=content,
            content_id=cid,
            published_at=earliest(s.hit.published_at for s in seen),
            language=next((s.hit.language for s in seen if s.hit.language), None),
            retrieved_at=first.hit.retrieved_at,
            metadata=metadata,
        )


def cluster_ids(pages: Sequence[Page], threshold: float = NEAR_DUPLICATE_THRESHOLD) -> list[str]:
    """Each page's cluster id (its representative's key), pages given in the order seen."""
    representatives: dict[str, list[Page]] = {}
    ids: list[str] = []
    for page in pages:
        domain = registered_domain(page.key)
        if domain is None:
            ids.append(page.key)
            continue
        candidates = representatives.setdefault(domain, [])
        match = next((r for r in candidates if similarity(page.text, r.text) >= threshold), None)
        if match is None:
            candidates.append(page)
        ids.append(page.key if match is None else match.key)
    return ids


@dataclass(frozen=True)
class Deduped:
    """The clusters (by id, in the order seen) and each list's hits as cluster ids."""

    clusters: dict[str, Cluster]
    ids: dict[str, list[str]]


def dedupe(
    lists: Mapping[str, Sequence[Hit]],
    owner: Mapping[str, str],
    threshold: float = NEAR_DUPLICATE_THRESHOLD,
) -> Deduped:
    """Group every hit of `lists` (run key -> hits; `owner`: run key -> platform) into clusters."""
    pages: dict[str, Page] = {}
    keys: dict[str, list[str]] = {}
    order = 0
    for run_key, hits in lists.items():
        keys[run_key] = []
        for hit in hits:
            key = canonical_url(hit.url)
            pages.setdefault(key, Page(key)).seen.append(Seen(order, owner[run_key], hit))
            keys[run_key].append(key)
            order += 1
    of_page = dict(zip(pages, cluster_ids(list(pages.values()), threshold), strict=True))
    clusters: dict[str, Cluster] = {}
    for page in pages.values():
        clusters.setdefault(of_page[page.key], Cluster()).pages.append(page)
    ids = {run_key: [of_page[key] for key in run_keys] for run_key, run_keys in keys.items()}
    return Deduped(clusters=clusters, ids=ids)
