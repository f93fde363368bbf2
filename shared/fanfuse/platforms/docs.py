"""`docs`: BM25 over a local corpus (the bundled Vaswani collection unless configured), or over
a corpus published to a bucket (`corpus_url`, see `fanfuse.retrieval.published`).

The index is built once per corpus content and cached on disk (see `fanfuse.retrieval`); a
search only tokenizes the queries and scores them. A published corpus's index is published with
it: a worker downloads and checks it on its first search, then only follows the pointer.
Blocking work runs in a thread so that several platforms keep running concurrently on the event
loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, Self

from pydantic import Field, model_validator

from fanfuse.platforms.contract import (
    Capabilities,
    Platform,
    PlatformContext,
    PlatformSettings,
    RunRecord,
    SearchParams,
)
from fanfuse.retrieval import Ranked
from fanfuse.retrieval.buckets import bucket_problem
from fanfuse.retrieval.corpus import Corpus, load_corpus, snippet
from fanfuse.retrieval.published import REFRESH_S, CorpusVersion, describe, subscription
from fanfuse.rules.health import COLD_START
from fanfuse.wire.errors import CorpusError, ProviderError
from fanfuse.wire.models import Hit

SNIPPET_CHARS = 300


class CorpusSettings(PlatformSettings):
    """Where an offline platform's corpus is: a local path, or a published corpus's URL."""

    corpus: Path | None = None
    """A TREC file, a JSONL file or a folder of .txt/.md files; None = bundled Vaswani."""
    corpus_url: str | None = None
    """A published corpus (`fanfuse index DIR --publish URL`): s3://BUCKET/PREFIX,
    gs://BUCKET/PREFIX or file:///FOLDER; instead of `corpus`."""
    corpus_refresh_s: float = Field(
        default=REFRESH_S,
        ge=0,
        description="seconds a worker keeps the published version it holds before it reads the "
        "corpus's pointer again (0: at every search)",
    )

    @model_validator(mode="after")
    def _one_corpus(self) -> Self:
        if self.corpus is not None and self.corpus_url:
            raise ValueError("set corpus or corpus_url, not both")
        return self


class DocsSettings(CorpusSettings):
    pass


def corpus_problem(settings: CorpusSettings) -> str | None:
    """Why the configured corpus cannot be used (a cheap check for `availability`: no request)."""
    if settings.corpus_url:
        return bucket_problem(settings.corpus_url)
    path = settings.corpus
    if path is not None and not path.expanduser().exists():
        return f"corpus not found: {path}"
    return None


def to_hits(corpus: Corpus, ranked: list[Ranked], params: SearchParams) -> list[list[Hit]]:
    """One list of hits per query, ranks 1-based, at most `params.limit` each."""
    out: list[list[Hit]] = []
    for query_index, results in enumerate(ranked):
        hits: list[Hit] = []
        for rank, (position, score) in enumerate(results[: params.limit], start=1):
            doc = corpus.docs[position]
            hits.append(
                Hit(
                    title=doc.title,
                    url=doc.url,
                    snippet=snippet(doc.text, SNIPPET_CHARS),
                    content=doc.text if params.include_content else None,
                    score=score,
                    rank=rank,
                    query_index=query_index,
                    metadata={"doc_id": doc.id, "corpus": corpus.name},
                )
            )
        out.append(hits)
    return out


class ColdStarts:
    """What this process has loaded (an index, a model): the first run that loads one reports
    the seconds as its cold start (rules/health.py), which its latency then leaves out. The
    indexes and the model stay in memory for the process's life, so later runs are warm."""

    def __init__(self) -> None:
        self._loaded: set[str] = set()
        self._forgotten: set[str] = set()
        self._lock = threading.Lock()

    def forget(self, key: str) -> None:
        """The run inside `loading(key)` did not load it after all (it answered otherwise)."""
        with self._lock:
            self._forgotten.add(key)

    @contextlib.contextmanager
    def loading(self, key: str, record: RunRecord) -> Iterator[None]:
        started = time.monotonic()
        yield
        with self._lock:
            if key in self._forgotten:
                self._forgotten.discard(key)
                return
            first = key not in self._loaded
            self._loaded.add(key)
        if first:
            spent = time.monotonic() - started
            record.timings[COLD_START] = round(record.timings.get(COLD_START, 0.0) + spent, 4)


COLD_STARTS = ColdStarts()


def open_corpus(platform: str, path: Path | None) -> Corpus:
    """Load the corpus, turning a bad file into a clear provider error for the task's record."""
    try:
        return load_corpus(path)
    except CorpusError as exc:
        raise ProviderError(platform, str(exc)) from exc


def open_published(
    platform: str, settings: CorpusSettings, cache_root: Path | None = None
) -> CorpusVersion:
    """The published corpus's current version, downloaded under `cache_root`; a missing,
    unreachable or tampered corpus is a clear provider error naming the object (this
    platform's run fails, no other)."""
    assert settings.corpus_url is not None
    try:
        return subscription(settings.corpus_url, settings.corpus_refresh_s, cache_root).current()
    except CorpusError as exc:
        raise ProviderError(platform, str(exc)) from exc


class Searcher(Protocol):
    def search(self, queries: list[str], k: int) -> list[Ranked]: ...


def search_published(
    platform: str,
    settings: CorpusSettings,
    params: SearchParams,
    index: Callable[[CorpusVersion], Searcher],
    cache_root: Path | None = None,
) -> list[list[Hit]]:
    """Search the published corpus's current version with its `index` (BM25 or dense); each
    hit names the corpus URL and the version that answered it."""
    version = open_published(platform, settings, cache_root)
    try:
        ranked = index(version).search(params.queries, params.limit)
    except CorpusError as exc:
        raise ProviderError(platform, str(exc)) from exc
    lists = to_hits(version.corpus, ranked, params)
    for hits in lists:
        for hit in hits:
            hit.metadata.update(describe(version))
    return lists


class DocsPlatform(Platform[DocsSettings]):
    name = "docs"
    rate_limit = None  # local: calls no provider
    typical_latency_s = 0.05  # BM25 over a local index: milliseconds once loaded
    description = "BM25 (bm25s, Snowball stemmer) over a local corpus; Vaswani by default"
    settings_model = DocsSettings
    capabilities = Capabilities(multi_query=True, content=True)

    def availability(self) -> str | None:
        reason = super().availability()
        return reason or corpus_problem(self.settings())

    async def search(
        self, ctx: PlatformContext[DocsSettings], params: SearchParams
    ) -> list[list[Hit]]:
        return await asyncio.to_thread(self._search, ctx.settings, params, ctx.record)

    def _search(
        self, settings: DocsSettings, params: SearchParams, record: RunRecord
    ) -> list[list[Hit]]:
        if settings.corpus_url:
            # a fresh process downloads and checks the version, then loads its index: once
            with COLD_STARTS.loading(f"bm25:{settings.corpus_url}", record):
                return search_published(
                    self.name, settings, params, CorpusVersion.bm25, self.cache_root
                )
        path = settings.corpus
        try:
            # a fresh process imports bm25s, parses the corpus and loads its index: once
            with COLD_STARTS.loading(f"bm25:{path}", record):
                from fanfuse.retrieval.bm25 import Bm25Index

                corpus = open_corpus(self.name, path)
                index = Bm25Index.load_or_build(corpus, self.cache_root)
        except CorpusError as exc:
            raise ProviderError(self.name, str(exc)) from exc
        return to_hits(corpus, index.search(params.queries, params.limit), params)
