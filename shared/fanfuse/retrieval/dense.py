"""Dense retrieval with all-MiniLM-L6-v2 on ONNX Runtime (`fanfuse.retrieval.minilm`): no torch.

The model ships inside the package, converted once from the weights sentence-transformers used
(`scripts/export-onnx-model`), so nothing is fetched from a hub and a search imports neither
torch nor sentence-transformers. Document embeddings are computed once per corpus fingerprint
and model, cached as `.npy`, and only loaded afterwards.

The bundled Vaswani corpus's embeddings ship with the package (`BUNDLE`, int8 with one scale per
row: 4.4 MB instead of 17.6 MB of float32, and the same top-10 on Vaswani's queries, see
`tests/integration/test_dense_bundle.py`), so a first search does not spend a minute encoding.
The bundle names the corpus fingerprint and the model's hash it was made from and is used only
when both match this installation; `fanfuse index --bundle` writes it anew.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from fanfuse.retrieval import IndexMemo, Ranked, index_dir, publish, read_meta, top_k
from fanfuse.retrieval.corpus import DATA_DIR, Corpus, indexable_text
from fanfuse.retrieval.minilm import (
    DIMENSION,
    MODEL_NAME,
    Encoder,
    encoder,
    model_hash,
    unavailable_reason,
)
from fanfuse.wire.errors import CorpusError

SCHEMA = 3
"""3: the embeddings come from the ONNX model and the meta names its hash (`weights`)."""
KIND = "dense-all-minilm-l6-v2"
CHUNK = 256  # documents per progress step
QUERY_BATCH = 16
"""Texts up to which the query encoder (one thread) encodes them (see `minilm.Encoder`)."""
BUNDLE = DATA_DIR / f"{KIND}.npz"
"""The bundled corpus's embeddings (see the module docstring); versioned with the corpus."""
BUNDLE_SCHEMA = 1

ProgressCallback = Callable[[int, int], None]
"""Called with (documents encoded so far, total) while a corpus is encoded."""

__all__ = ["MODEL_NAME", "DenseIndex", "dense_unavailable_reason", "encode", "weights_hash"]


def dense_unavailable_reason() -> str | None:
    """None when dense retrieval can run here, else why not; imports nothing heavy."""
    return unavailable_reason()


def weights_hash() -> str:
    """The model's identity, which cached and bundled embeddings must name to be used."""
    return model_hash()


def encode(
    texts: list[str],
    show_progress: bool = False,
    on_progress: ProgressCallback | None = None,
) -> NDArray[np.float32]:
    """Unit-length embeddings, one row per text, in order.

    A few texts (a search's queries) go to the query encoder, on one thread; more (a corpus)
    to the corpus encoder, on every core. `on_progress(done, total)` is called in the calling
    thread with 0 before the model is loaded (about a second), then after every chunk of
    `CHUNK` texts.
    """
    if on_progress is not None:
        on_progress(0, len(texts))
    model = encoder("corpus" if len(texts) > QUERY_BATCH else "query")
    rows = np.zeros((len(texts), DIMENSION), np.float32)
    # Longest first, in chunks: less padding per batch, and a progress step per chunk.
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    chunks = [order[i : i + CHUNK] for i in range(0, len(order), CHUNK)]
    done = 0
    with _progress(len(texts), show_progress) as advance:
        for chunk in chunks:
            if _exiting.is_set():
                raise RuntimeError("the process is exiting: encoding abandoned")
            rows[chunk] = model.encode([texts[i] for i in chunk])
            advance(len(chunk))
            done += len(chunk)
            if on_progress is not None:
                on_progress(done, len(texts))
    return rows


_exiting = threading.Event()


@atexit.register
def _abandon_background_encoding() -> None:
    """At exit, stop a background encoding (`DenseIndex.ready`) after its current chunk and
    wait for it: ONNX Runtime aborts the process if the interpreter finalizes while one of its
    sessions runs in another thread. Nothing is cached of an abandoned encoding."""
    _exiting.set()
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


_meta = index_meta  # the name other modules used before `index_meta` was public


def load_model() -> Encoder:
    """The process's query encoder, made now (about a second: the files' hashes, the session)
    rather than by a search's first query, whose latency it would count."""
    return encoder("query")


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
            if not _exiting.is_set():
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
