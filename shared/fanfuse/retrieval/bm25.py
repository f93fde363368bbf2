"""BM25 over a corpus with bm25s: English stopwords and the Snowball English stemmer.

Stemming matters here: on Vaswani it lifts nDCG@10 from about 0.35 to about 0.43. The index is
built once per corpus fingerprint and loaded from disk afterwards; a request never rebuilds it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from fanfuse.retrieval import IndexMemo, Ranked, index_dir, publish, read_meta, top_k
from fanfuse.retrieval.corpus import Corpus, indexable_text
from fanfuse.wire.errors import CorpusError

log = logging.getLogger(__name__)

SCHEMA = 1
KIND = "bm25"
K1 = 1.5
B = 0.75
METHOD = "lucene"
_WORD = re.compile(r"(?u)\b\w\w+\b")  # bm25s' default splitter
_STOPWORDS = frozenset(STOPWORDS_EN)


class Analyzer:
    """Lowercase, split, drop English stopwords, Snowball-stem: the same for documents and queries.

    PyStemmer objects are not safe to share between threads, hence the lock; the word -> stem
    cache makes repeated words (most of them) cost one dict lookup.
    """

    def __init__(self) -> None:
        self._stemmer = Stemmer.Stemmer("english")
        self._stems: dict[str, str] = {}
        self._lock = threading.Lock()

    def __call__(self, text: str) -> list[str]:
        words = [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]
        with self._lock:
            out: list[str] = []
            for word in words:
                stem = self._stems.get(word)
                if stem is None:
                    stem = self._stems[word] = str(self._stemmer.stemWord(word))
                out.append(stem)
            return out


def index_meta(corpus: Corpus) -> dict[str, Any]:
    """What a cached (or published) index of `corpus` must name to be loaded as it is."""
    return {
        "schema": SCHEMA,
        "kind": KIND,
        "corpus": corpus.name,
        "fingerprint": corpus.fingerprint,
        "documents": len(corpus),
        "bm25s": bm25s.__version__,
        "k1": K1,
        "b": B,
        "method": METHOD,
        "stemmer": "snowball-english",
        "stopwords": "bm25s-en",
    }


class Bm25Index:
    """A BM25 index of one corpus; `search` is safe to call from several threads at once."""

    _memo: ClassVar[IndexMemo[Bm25Index]] = IndexMemo()

    def __init__(self, corpus: Corpus, retriever: bm25s.BM25, path: Path) -> None:
        self.corpus = corpus
        self.path = path
        self._retriever = retriever
        self._vocab: dict[str, int] = dict(retriever.vocab_dict)
        self._analyzer = Analyzer()

    @classmethod
    def load_or_build(cls, corpus: Corpus, cache_root: Path | None = None) -> Bm25Index:
        """The index from this process's memo, else from disk, else built once and saved."""
        path = index_dir(corpus, KIND, cache_root)

        def make() -> Bm25Index:
            return cls(corpus, cls._load_or_build_retriever(corpus, path), path)

        return cls._memo.get(path, corpus, make)

    @classmethod
    def clear_memo(cls) -> None:
        """Forget the in-process indexes (tests; the disk cache is untouched)."""
        cls._memo.clear()

    @classmethod
    def from_folder(cls, corpus: Corpus, path: Path) -> Bm25Index:
        """The index saved at `path` (a published corpus's copy) when it was made for this
        corpus by this analyzer and bm25s, else built in memory (seconds per 10,000 documents):
        a publisher's other bm25s version costs a worker time, never a wrong index."""
        if read_meta(path) == index_meta(corpus):
            try:
                return cls(
                    corpus, bm25s.BM25.load(str(path), mmap=False, show_progress=False), path
                )
            except (OSError, ValueError) as exc:
                log.warning("BM25 index at %s is unreadable (%s); building it", path, exc)
        else:
            log.warning("BM25 index at %s was made otherwise; building it from the documents", path)
        return cls(corpus, cls.build(corpus), path)

    @classmethod
    def _load_or_build_retriever(cls, corpus: Corpus, path: Path) -> bm25s.BM25:
        meta = index_meta(corpus)
        if read_meta(path) == meta:
            try:
                return bm25s.BM25.load(str(path), mmap=False, show_progress=False)
            except (OSError, ValueError) as exc:
                log.warning("BM25 index at %s is unreadable (%s); rebuilding it", path, exc)
        retriever = cls.build(corpus)
        publish(path, meta, lambda tmp: retriever.save(str(tmp), show_progress=False))
        return retriever

    @staticmethod
    def build(corpus: Corpus) -> bm25s.BM25:
        """Tokenize and index every document (seconds for Vaswani); called once per fingerprint."""
        analyzer = Analyzer()
        tokens = [analyzer(indexable_text(doc)) for doc in corpus.docs]
        if not any(tokens):
            raise CorpusError(f"{corpus.source}: no document has a searchable word")
        retriever = bm25s.BM25(k1=K1, b=B, method=METHOD)
        retriever.index(tokens, show_progress=False)
        return retriever

    def save(self, folder: Path) -> None:
        """Write the index's files (as bm25s saves them, no meta) into `folder` (publishing)."""
        self._retriever.save(str(folder), show_progress=False)

    def search(self, queries: list[str], k: int) -> list[Ranked]:
        """Top-k (doc position, score) per query, best first; a query with no indexed term -> []."""
        return [self._search_one(query, k) for query in queries]

    def analyze(self, text: str) -> list[str]:
        """The index's terms of `text` (as documents and queries are analyzed), in order."""
        return self._analyzer(text)

    def search_weighted(self, terms: Mapping[str, float], k: int) -> Ranked:
        """Top-k for a weighted query of analyzed terms: sum of weight x the term's BM25 score.

        This is how an expanded query (RM3, evaluation.py) is asked: the expansion terms carry
        weights that a query string cannot. Terms the index does not know add nothing.
        """
        known = sorted((self._vocab[t], w) for t, w in terms.items() if t in self._vocab and w)
        if not known or k <= 0:
            return []
        scores = np.zeros(len(self.corpus), dtype=np.float64)
        for term_id, weight in known:
            scores += weight * np.asarray(
                self._retriever.get_scores_from_ids([term_id]), dtype=np.float64
            )
        return top_k(scores, k, positive_only=True)

    def _search_one(self, query: str, k: int) -> Ranked:
        ids = [self._vocab[t] for t in self._analyzer(query) if t in self._vocab]
        if not ids or k <= 0:
            return []
        scores = np.asarray(self._retriever.get_scores_from_ids(ids), dtype=np.float64)
        return top_k(scores, k, positive_only=True)
