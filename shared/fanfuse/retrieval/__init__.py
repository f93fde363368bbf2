"""Local retrieval over a `Corpus`: BM25 (`bm25`) and dense embeddings (`dense`: the index;
`embeddings`: texts encoded with the shipped model, `minilm`; `bundle`: Vaswani's, shipped).

Both indexes are built once per corpus fingerprint, cached under
`cache_dir()/indexes/{fingerprint}/`, and memoized per process; searches return
`(position in corpus.docs, score)` pairs, best first.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from fanfuse.retrieval.corpus import Corpus, cache_dir

Ranked = list[tuple[int, float]]
T = TypeVar("T")


def index_dir(corpus: Corpus, kind: str, cache_root: Path | None = None) -> Path:
    """Where the `kind` index of this corpus lives: `{cache root}/indexes/{fingerprint}/{kind}`."""
    root = cache_root if cache_root is not None else cache_dir()
    return root.expanduser().resolve() / "indexes" / corpus.fingerprint / kind


class IndexMemo(Generic[T]):
    """The indexes this process holds, by (index folder, corpus fingerprint); thread-safe.

    An index is loaded or built under the memo's lock, so threads that ask for the same index
    at once get one index, made once.
    """

    def __init__(self) -> None:
        self._indexes: dict[tuple[Path, str], T] = {}
        self._lock = threading.Lock()

    def get(self, path: Path, corpus: Corpus, make: Callable[[], T]) -> T:
        """The memoized index at `path` for this corpus, else `make()`, memoized."""
        key = (path, corpus.fingerprint)
        with self._lock:
            index = self._indexes.get(key)
            if index is None:
                index = make()
                self._indexes[key] = index
            return index

    def peek(self, path: Path, corpus: Corpus) -> T | None:
        """The memoized index, without waiting for one being made (which holds the lock)."""
        return self._indexes.get((path, corpus.fingerprint))

    def clear(self) -> None:
        with self._lock:
            self._indexes.clear()


def read_meta(directory: Path) -> dict[str, Any] | None:
    """The index's `meta.json`, or None when the index is missing or was never completed."""
    try:
        data = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def publish(directory: Path, meta: dict[str, Any], write: Callable[[Path], None]) -> None:
    """Write an index into a private temporary folder, then move it into place.

    `meta.json` is written last and the folder is renamed atomically, so a reader (another
    process, a crash halfway) never sees a half-written index. If another process published
    the same index first, that one is kept.
    """
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp's 0700 would hide a shared cache from other users
        write(tmp)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
        if directory.exists() and read_meta(directory) != meta:
            # A stale or broken index from an older version: move it aside, then replace it.
            trash = directory.with_name(f".{directory.name}-old-{uuid.uuid4().hex}")
            os.replace(directory, trash)
            shutil.rmtree(trash, ignore_errors=True)
        try:
            os.replace(tmp, directory)
        except OSError:
            if read_meta(directory) != meta:
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def top_k(scores: NDArray[np.float64], k: int, positive_only: bool) -> Ranked:
    """The k best positions by score; ties go to the earlier document, so results are stable."""
    candidates = np.flatnonzero(scores > 0) if positive_only else np.arange(scores.shape[0])
    if candidates.size == 0 or k <= 0:
        return []
    if candidates.size > k:
        values = scores[candidates]
        # Keep everything tied with the k-th score, then order exactly.
        kth = np.partition(values, candidates.size - k)[candidates.size - k]
        candidates = candidates[values >= kth]
    values = scores[candidates]
    order = np.lexsort((candidates, -values))[:k]
    return [(int(candidates[i]), float(values[i])) for i in order]
