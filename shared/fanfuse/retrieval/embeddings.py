"""Texts to embeddings with the shipped model (`minilm`), and the name every stored copy carries.

The model (`minilm.Encoder`) turns one batch into rows; this module decides how a workload is
encoded, which is what a caller waits on: a search's few queries go to the one-thread query
encoder, a corpus to the every-core one, longest texts first in chunks of `CHUNK` (less padding
per batch, and one progress step per chunk: a bar on stderr for `fanfuse index` and `eval`, or
a callback for a front that reports progress its own way). A corpus takes minutes to encode, so a
process that exits abandons an encoding at its next chunk (`abandon`) rather than wait for it.

Embeddings are only as good as the model that made them: `KIND` and `weights_hash()` are what a
cached index (dense.py), the bundled Vaswani embeddings (bundle.py) and a published corpus name,
so that embeddings of another model are never ranked against this model's queries.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
from numpy.typing import NDArray

from fanfuse.retrieval.minilm import DIMENSION, MODEL_NAME, Encoder, encoder, model_hash

KIND = "dense-all-minilm-l6-v2"
"""These embeddings' name: the cache folder of a dense index, the bundle's file name, and the
`kind` their metadata names."""
CHUNK = 256  # documents per progress step
QUERY_BATCH = 16
"""Texts up to which the query encoder (one thread) encodes them (see `minilm.Encoder`)."""

ProgressCallback = Callable[[int, int], None]
"""Called with (documents encoded so far, total) while a corpus is encoded."""

__all__ = [
    "KIND",
    "MODEL_NAME",
    "ProgressCallback",
    "abandon",
    "encode",
    "load_model",
    "weights_hash",
]


def weights_hash() -> str:
    """The model's identity, which cached and bundled embeddings must name to be used."""
    return model_hash()


def load_model() -> Encoder:
    """The process's query encoder, made now (about a second: the files' hashes, the session)
    rather than by a search's first query, whose latency it would count."""
    return encoder("query")


_exiting = threading.Event()


def abandon() -> None:
    """Stop every encoding in this process after its current chunk (it raises RuntimeError):
    the process is exiting (dense.py's exit hook, which then waits for its background ones)."""
    _exiting.set()


def abandoned() -> bool:
    """Whether `abandon` was called: an encoding that stopped is no failure then."""
    return _exiting.is_set()


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
    with _progress_bar(len(texts), show_progress) as advance:
        for chunk in chunks:
            if _exiting.is_set():
                raise RuntimeError("the process is exiting: encoding abandoned")
            rows[chunk] = model.encode([texts[i] for i in chunk])
            advance(len(chunk))
            done += len(chunk)
            if on_progress is not None:
                on_progress(done, len(texts))
    return rows


@contextmanager
def _progress_bar(total: int, show: bool) -> Iterator[Callable[[int], None]]:
    """`advance(n)`: a rich progress bar on stderr when `show`, else a no-op (rich is imported
    only to draw one)."""
    if not show:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("Encoding documents with " + MODEL_NAME),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
    )
    bar.start()
    try:
        task = bar.add_task("encode", total=total)
        yield lambda n: bar.advance(task, n)
    finally:
        bar.stop()
