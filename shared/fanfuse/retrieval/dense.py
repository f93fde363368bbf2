"""The dense index: cosine search over a corpus's embeddings, cached, memoized, or encoded once.

A corpus's document embeddings (embeddings.py) are computed once per corpus fingerprint and
model, cached as `.npy` under the index folder (`retrieval.index_dir`) and only loaded afterwards;
the bundled corpus's come from the package's bundle (bundle.py) when it matches this model. A
search encodes only its queries and ranks every document by one matrix product.

What can take minutes is never on a search's path unless it asks: `ready` answers None and encodes
in a background thread when nothing stored matches, and a published corpus's embeddings are
loaded as made (`from_folder`), never encoded by a worker. A background encoding is an ONNX
Runtime session in another thread, which aborts the process if the interpreter finalizes under
it: the exit hook here abandons it after its current chunk and waits for it.
"""

from __future__ import annotations

import atexit
import functools
import threading
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from fanfuse.retrieval import IndexMemo, Ranked, bundle, index_dir, publish, read_meta, top_k
from fanfuse.retrieval.corpus import Corpus, indexable_text
from fanfuse.retrieval.embeddings import (
    KIND,
    ProgressCallback,
    abandon,
    abandoned,
    encode,
    weights_hash,
)
from fanfuse.retrieval.minilm import DIMENSION, MODEL_NAME, unavailable_reason
from fanfuse.wire.errors import CorpusError

SCHEMA = 3
"""3: the embeddings come from the ONNX model and the meta names its hash (`weights`)."""

__all__ = ["KIND", "DenseIndex", "dense_unavailable_reason", "index_meta"]


def dense_unavailable_reason() -> str | None:
    """None when dense retrieval can run here, else why not; imports nothing heavy."""
    return unavailable_reason()


def index_meta(corpus: Corpus) -> dict[str, Any]:
    """What a cached (or published) index of `corpus` must name to be used with this model."""
    return {
        "schema": SCHEMA,
        "kind": KIND,
        "model": MODEL_NAME,
        "runtime": "onnxruntime",
        "weights": weights_hash(),
        "corpus": corpus.name,
        "fingerprint": corpus.fingerprint,
        "documents": len(corpus),
        "normalized": True,
    }


@atexit.register
def _abandon_background_encoding() -> None:
    """At exit, stop a background encoding (`DenseIndex.ready`) after its current chunk and
    wait for it: ONNX Runtime aborts the process if the interpreter finalizes while one of its
    sessions runs in another thread. Nothing is cached of an abandoned encoding."""
    abandon()
    with DenseIndex._building_lock:
        threads = list(DenseIndex._building.values())
    for thread in threads:
        thread.join(timeout=60)


@functools.cache
def _blas() -> Any:
    """threadpoolctl's view of the loaded BLAS libraries, found once per process.

    A search's product (documents x 384 by 384 x a few queries) runs on one BLAS thread: on two
    threads OpenBLAS's second one spins after every product, which measured ~25 ms of CPU per
    warm search on a resident server (half its CPU), for a product that takes ~2 ms.
    """
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


class DenseIndex:
    """Cosine search over cached, normalized document embeddings; thread-safe."""

    _memo: ClassVar[IndexMemo[DenseIndex]] = IndexMemo()
    _building: ClassVar[dict[Path, threading.Thread]] = {}
    _building_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, corpus: Corpus, embeddings: NDArray[np.float32], path: Path) -> None:
        self.corpus = corpus
        self.embeddings = embeddings
        self.path = path

    @classmethod
    def load_or_build(
        cls,
        corpus: Corpus,
        cache_root: Path | None = None,
        show_progress: bool = True,
        on_progress: ProgressCallback | None = None,
    ) -> DenseIndex:
        """The index from this process's memo, else the cached `.npy`, else encoded once.

        `show_progress` draws a progress bar on stderr while encoding (`fanfuse index`, `eval`);
        `on_progress(done, total)` is called only when the corpus is actually encoded.
        """
        path = index_dir(corpus, KIND, cache_root)

        def make() -> DenseIndex:
            return cls(corpus, cls._load_or_encode(corpus, path, show_progress, on_progress), path)

        return cls._memo.get(path, corpus, make)

    @classmethod
    def clear_memo(cls) -> None:
        """Forget the in-process indexes (tests; the disk cache is untouched)."""
        cls._memo.clear()

    @classmethod
    def from_folder(cls, corpus: Corpus, path: Path) -> DenseIndex:
        """The embeddings saved at `path` (a published corpus's copy, `meta.json` beside them),
        never encoded here: a worker would take minutes, and embeddings of another model would
        rank nonsense. CorpusError, saying which, when they were made otherwise."""
        meta = read_meta(path) or {}
        expected = index_meta(corpus)
        differ = sorted(k for k in expected if meta.get(k) != expected[k])
        if differ:
            detail = ", ".join(f"{k} {meta.get(k)!r} (here {expected[k]!r})" for k in differ)
            raise CorpusError(f"{path}: the embeddings were made for another {detail}")
        try:
            rows = np.load(path / "embeddings.npy", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise CorpusError(f"{path / 'embeddings.npy'}: unreadable ({exc})") from exc
        if rows.ndim != 2 or rows.shape != (len(corpus), DIMENSION):
            raise CorpusError(
                f"{path / 'embeddings.npy'}: shape {rows.shape}, not ({len(corpus)}, {DIMENSION})"
            )
        return cls(corpus, np.ascontiguousarray(rows, dtype=np.float32), path)

    @classmethod
    def _load_or_encode(
        cls,
        corpus: Corpus,
        path: Path,
        show_progress: bool,
        on_progress: ProgressCallback | None,
    ) -> NDArray[np.float32]:
        stored = cls._stored(corpus, path)
        if stored is not None:
            return stored
        embeddings = cls.build(corpus, show_progress, on_progress)
        publish(path, index_meta(corpus), lambda tmp: np.save(tmp / "embeddings.npy", embeddings))
        return embeddings

    @staticmethod
    def _stored(corpus: Corpus, path: Path) -> NDArray[np.float32] | None:
        """The cached embeddings, else the bundle's when made for this corpus and model; never
        encodes."""
        if read_meta(path) == index_meta(corpus):
            try:
                cached = np.load(path / "embeddings.npy", allow_pickle=False)
            except (OSError, ValueError):
                cached = None
            if cached is not None and cached.ndim == 2 and cached.shape[0] == len(corpus):
                return np.ascontiguousarray(cached, dtype=np.float32)
        bundled, _ = bundle.read_bundle(bundle.BUNDLE, corpus)
        return bundled

    @classmethod
    def ready(cls, corpus: Corpus, cache_root: Path | None = None) -> DenseIndex | None:
        """The index when it can be had without encoding (memo, cache, bundle); else None, and
        the corpus is encoded in a background thread (one per index), cached for later searches.

        For a search that must not wait minutes (the bundled corpus whose bundle does not match
        this model): it answers otherwise meanwhile (`vectors` answers from BM25 and says so).
        """
        path = index_dir(corpus, KIND, cache_root)
        index = cls._memo.peek(path, corpus)
        if index is not None:
            return index
        with cls._building_lock:
            building = cls._building.get(path)
            if building is not None and building.is_alive():
                return None
            stored = cls._stored(corpus, path)
            if stored is None:
                thread = threading.Thread(
                    target=cls._encode_in_background,
                    args=(corpus, cache_root),
                    name=f"encode-{corpus.name}",
                    daemon=True,
                )
                cls._building[path] = thread
                thread.start()
                return None
        return cls._memo.get(path, corpus, lambda: cls(corpus, stored, path))

    @classmethod
    def _encode_in_background(cls, corpus: Corpus, cache_root: Path | None) -> None:
        try:
            cls.load_or_build(corpus, cache_root, show_progress=False)
        except RuntimeError:
            if not abandoned():
                raise

    @classmethod
    def building(cls, corpus: Corpus, cache_root: Path | None = None) -> threading.Thread | None:
        """The background encoding `ready` started for this index, if any (tests join it)."""
        with cls._building_lock:
            return cls._building.get(index_dir(corpus, KIND, cache_root))

    @staticmethod
    def build(
        corpus: Corpus, show_progress: bool = True, on_progress: ProgressCallback | None = None
    ) -> NDArray[np.float32]:
        """Encode every document; called once per corpus fingerprint and model."""
        return encode([indexable_text(doc) for doc in corpus.docs], show_progress, on_progress)

    def search(self, queries: list[str], k: int) -> list[Ranked]:
        """Top-k (doc position, cosine) per query, best first; a blank query -> []."""
        asked = [i for i, q in enumerate(queries) if q.strip()]
        out: list[Ranked] = [[] for _ in queries]
        if not asked or k <= 0:
            return out
        vectors = encode([queries[i] for i in asked])
        with _blas().limit(limits=1, user_api="blas"):
            similarities = (self.embeddings @ vectors.T).astype(np.float64)
        for column, i in enumerate(asked):
            out[i] = top_k(similarities[:, column], k, positive_only=False)
        return out
