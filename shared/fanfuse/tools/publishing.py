"""`fanfuse index DIR --publish URL`: a corpus and its indexes, published for the cloud.

The indexes are built (or taken from the cache) exactly as for a local search, then uploaded as
a new immutable version with the pointer moved last (`fanfuse.retrieval.published`). Each
object is named as it is written, so an operator sees where the corpus went and how big it is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fanfuse.retrieval.bm25 import Bm25Index
from fanfuse.retrieval.buckets import bucket_problem
from fanfuse.retrieval.corpus import load_corpus
from fanfuse.retrieval.dense import DenseIndex, dense_unavailable_reason
from fanfuse.retrieval.published import Pointer, publish
from fanfuse.wire.errors import CorpusError


def publish_index(
    path: Path | None,
    url: str,
    dense: bool,
    say: Callable[[str], None],
    name: str | None = None,
) -> Pointer:
    """Publish the corpus at `path` (None: the bundled Vaswani) to `url`, named `name` (its
    results' URLs say it; default: the folder's or file's name); with `dense`, its embeddings
    too (the `vectors` platform needs them; encoded here when not cached)."""
    problem = bucket_problem(url)
    if problem is not None:
        raise CorpusError(problem)
    if dense:
        reason = dense_unavailable_reason()
        if reason is not None:
            raise CorpusError(f"cannot encode the corpus for `vectors`: {reason} (or --no-dense)")
    corpus = load_corpus(path, name)
    say(f"corpus {corpus.name}: {len(corpus):,} documents, fingerprint {corpus.fingerprint}")
    bm25 = Bm25Index.load_or_build(corpus)
    embeddings = DenseIndex.load_or_build(corpus, show_progress=True) if dense else None
    say(f"publishing to {url}")
    pointer = publish(corpus, url, bm25, embeddings, say=lambda line: say(f"  {line}"))
    say(f"{url}: version {pointer.version} is current")
    return pointer
