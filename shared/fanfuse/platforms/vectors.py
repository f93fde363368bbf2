"""`vectors`: dense retrieval with all-MiniLM-L6-v2 over the same corpora as `docs`.

The model runs on ONNX Runtime (`fanfuse.retrieval.minilm`): no torch. An optional extra:
without onnxruntime and tokenizers installed the platform says why it is unavailable instead of
failing at import. Over a published corpus (`corpus_url`) the embeddings come with the corpus
and only the queries are encoded; a version made with another model is refused. Document
embeddings are
encoded once per corpus and cached; run `fanfuse index` first for a large corpus, since
encoding Vaswani takes minutes on two cores. When a search has to encode the corpus, it reports
`encoding corpus {done}/{total}` as the platform's progress while it does. The bundled corpus's
embeddings ship with the package; if they do not fit the installed model (or the corpus), a
search answers from BM25 at once, saying so, while they are encoded in the background.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

from fanfuse.platforms.contract import (
    Capabilities,
    Platform,
    PlatformContext,
    RunRecord,
    SearchParams,
)
from fanfuse.platforms.docs import (
    COLD_STARTS,
    CorpusSettings,
    corpus_problem,
    open_corpus,
    search_published,
    to_hits,
)
from fanfuse.retrieval.corpus import Corpus, default_corpus_path
from fanfuse.retrieval.dense import dense_unavailable_reason
from fanfuse.retrieval.embeddings import MODEL_NAME, ProgressCallback
from fanfuse.retrieval.published import CorpusVersion
from fanfuse.wire.models import Hit

log = logging.getLogger(__name__)


class VectorsSettings(CorpusSettings):
    pass


class VectorsPlatform(Platform[VectorsSettings]):
    name = "vectors"
    rate_limit = None  # local: calls no provider
    typical_latency_s = 0.3  # one query embedding on CPU, then a matrix product
    description = f"dense retrieval ({MODEL_NAME}, cosine) over a local corpus; Vaswani by default"
    settings_model = VectorsSettings
    capabilities = Capabilities(multi_query=True, content=True)

    def availability(self) -> str | None:
        reason = dense_unavailable_reason() or super().availability()
        return reason or corpus_problem(self.settings())

    async def search(
        self, ctx: PlatformContext[VectorsSettings], params: SearchParams
    ) -> list[list[Hit]]:
        stopped = threading.Event()
        try:
            return await asyncio.to_thread(
                self._search,
                ctx.settings,
                params,
                _encoding_reporter(ctx, stopped),
                ctx.record,
            )
        except asyncio.CancelledError:
            # The worker thread cannot be interrupted: it finishes encoding (so the cache is
            # there for the next search) but must not write progress to a finished run.
            stopped.set()
            raise

    def _search(
        self,
        settings: VectorsSettings,
        params: SearchParams,
        on_progress: ProgressCallback,
        record: RunRecord,
    ) -> list[list[Hit]]:
        if settings.corpus_url:
            with COLD_STARTS.loading(f"dense:{settings.corpus_url}", record):
                from fanfuse.retrieval.embeddings import load_model

                load_model()  # the first query's encoding would load it: a cold start
                return search_published(
                    self.name, settings, params, CorpusVersion.dense, self.cache_root
                )
        path = settings.corpus
        key = f"dense:{path}"
        with COLD_STARTS.loading(key, record):  # imports, the corpus, its index, the model
            from fanfuse.retrieval.dense import DenseIndex
            from fanfuse.retrieval.embeddings import load_model

            corpus = open_corpus(self.name, path)
            bundled = corpus.source == default_corpus_path().resolve()
            if bundled and DenseIndex.ready(corpus, self.cache_root) is None:
                # Its embeddings ship with the package; when they do not fit this model or
                # corpus, a first search must not wait minutes for them: BM25 answers meanwhile.
                COLD_STARTS.forget(key)
                return _bm25_meanwhile(corpus, params, record, self.cache_root)
            index = DenseIndex.load_or_build(
                corpus, self.cache_root, show_progress=False, on_progress=on_progress
            )
            load_model()  # the first query's encoding would load it: a cold start, not latency
        return to_hits(corpus, index.search(params.queries, params.limit), params)


FALLBACK_PROVIDER = "docs (BM25 while the vectors index is built in the background)"


def _bm25_meanwhile(
    corpus: Corpus, params: SearchParams, record: RunRecord, cache_root: Path
) -> list[list[Hit]]:
    """BM25's answer, marked as such: the run's `provider` says what answered and why, each hit's
    metadata says `retrieval: bm25`, and the answer is not cached as `vectors`' own."""
    from fanfuse.retrieval.bm25 import Bm25Index

    record.provider = FALLBACK_PROVIDER
    record.provisional = True
    ranked = Bm25Index.load_or_build(corpus, cache_root).search(params.queries, params.limit)
    lists = to_hits(corpus, ranked, params)
    for hits in lists:
        for hit in hits:
            hit.metadata["retrieval"] = "bm25"
    return lists


def _encoding_reporter(
    ctx: PlatformContext[VectorsSettings], stopped: threading.Event
) -> ProgressCallback:
    """Forward encoding progress to `ctx.report` from the worker thread, best effort.

    Reporting stops once `stopped` is set (the search was cancelled or timed out) or after a
    failed progress write: losing a progress update must not lose minutes of encoding.
    """

    def report(done: int, total: int) -> None:
        if stopped.is_set():
            return
        try:
            ctx.report(done, total, f"encoding corpus {done}/{total}")
        except Exception:
            stopped.set()
            log.warning("vectors: cannot report encoding progress", exc_info=True)

    return report
