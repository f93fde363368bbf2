"""The bundled Vaswani embeddings: used as they are when corpus and model match, refused when not,
and as good as float32 on Vaswani's own queries (the figures the bundle's docstring quotes)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fanfuse.retrieval import bundle as bundle_format
from fanfuse.retrieval import embeddings, top_k
from fanfuse.retrieval.bundle import BUNDLE, dequantize, quantize, read_bundle, write_bundle
from fanfuse.retrieval.corpus import Corpus, indexable_text, load_corpus, load_trec_queries
from fanfuse.retrieval.dense import DenseIndex

pytestmark = pytest.mark.slow

SAMPLE_STEP = 571  # 21 of Vaswani's documents, encoded afresh to check the bundle against
QUERIES = 8


@pytest.fixture(autouse=True)
def _fresh_memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FANFUSE_CACHE_DIR", str(tmp_path / "cache"))  # an empty cache
    DenseIndex.clear_memo()


@pytest.fixture(scope="module")
def vaswani() -> Corpus:
    return load_corpus()


def test_quantized_rows_keep_their_direction() -> None:
    rng = np.random.default_rng(7)
    rows = rng.normal(size=(50, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows[3] = 0.0  # an empty text's row must not divide by zero
    back = dequantize(*quantize(rows))
    assert back.dtype == np.float32 and back.shape == rows.shape
    cosines = np.sum(back * rows, axis=1)
    assert np.all(np.delete(cosines, 3) > 0.999)
    assert not np.any(back[3])


def test_a_fresh_cache_searches_vaswani_from_the_bundle_without_encoding_it(
    vaswani: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("the bundled corpus was encoded")

    monkeypatch.setattr(DenseIndex, "build", staticmethod(no_build))
    index = DenseIndex.load_or_build(vaswani, show_progress=False)
    assert index.embeddings.shape == (len(vaswani), 384)
    # The bundle holds this model's embeddings of these documents: encode a sample afresh.
    sample = list(range(0, len(vaswani), SAMPLE_STEP))
    fresh = embeddings.encode([indexable_text(vaswani.docs[i]) for i in sample])
    cosines = np.sum(fresh * index.embeddings[sample], axis=1)
    assert np.all(cosines > 0.999), cosines.min()
    [hits] = index.search(["measurement of dielectric constant of liquids"], 5)
    assert len(hits) == 5


def test_the_bundle_ranks_like_float32_on_vaswanis_queries(vaswani: Corpus) -> None:
    """Top-10 overlap with the float32 ranking (over all 93 queries: 99.6 %, top-1 98.9 %).

    float32 is re-encoded only for the bundle's top 20 of each query: cosine errors are about
    0.002, so the exact top 10 lies among them.
    """
    bundled, why = read_bundle(BUNDLE, vaswani)
    assert bundled is not None, why
    queries = list(load_trec_queries().values())[:QUERIES]
    overlaps = []
    for query_vector in embeddings.encode(queries):
        wide = [p for p, _ in top_k((bundled @ query_vector).astype(np.float64), 20, False)]
        exact = embeddings.encode([indexable_text(vaswani.docs[p]) for p in wide]) @ query_vector
        best = {wide[i] for i in np.argsort(-exact, kind="stable")[:10]}
        overlaps.append(len(best & set(wide[:10])) / 10)
    assert np.mean(overlaps) >= 0.95, overlaps


def test_a_bundle_of_another_corpus_or_model_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "notes.jsonl"
    rows = [{"id": f"n{i}", "text": f"note number {i} on lasers"} for i in range(4)]
    path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    corpus = load_corpus(path)
    embeddings = np.eye(4, 384, dtype=np.float32)
    bundle = tmp_path / "bundle.npz"
    write_bundle(bundle, corpus, embeddings)
    used, why = read_bundle(bundle, corpus)
    assert used is not None and why == ""
    assert np.allclose(used, embeddings, atol=1e-6)

    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    changed = load_corpus(path)
    stale = "bundle bundle.npz was made for another fingerprint"
    assert read_bundle(bundle, changed) == (None, stale)

    monkeypatch.setattr(bundle_format, "weights_hash", lambda: "0" * 32)
    assert read_bundle(bundle, corpus) == (None, "bundle bundle.npz was made for another weights")
    assert read_bundle(tmp_path / "none.npz", corpus)[0] is None
