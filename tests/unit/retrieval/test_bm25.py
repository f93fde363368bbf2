"""BM25 index: stemming, edge-case queries, and the on-disk cache that is built only once."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fanfuse.retrieval import index_dir
from fanfuse.retrieval.bm25 import Bm25Index
from fanfuse.retrieval.corpus import Corpus, load_corpus
from fanfuse.wire.errors import CorpusError

DOCS = [
    ("d1", "Microwave measurement of the dielectric constant of liquids"),
    ("d2", "Waveguide fed antennas radiating microwaves"),
    ("d3", "Digital computers for the design of band pass filters"),
    ("d4", "Coding systems for data transfer"),
    ("d5", "Dielectric losses in solids at radio frequencies"),
]


@pytest.fixture(autouse=True)
def _fresh_memo() -> None:
    Bm25Index.clear_memo()


def make_corpus(tmp_path: Path, docs: list[tuple[str, str]] = DOCS) -> Corpus:
    path = tmp_path / "small.jsonl"
    path.write_text(
        "\n".join(json.dumps({"id": i, "title": "", "text": t}) for i, t in docs),
        encoding="utf-8",
    )
    return load_corpus(path)


def ids(corpus: Corpus, ranked: list[tuple[int, float]]) -> list[str]:
    return [corpus.docs[p].id for p, _ in ranked]


def test_search_ranks_with_stemming(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path)
    index = Bm25Index.load_or_build(corpus, cache_root=tmp_path / "cache")
    [dielectric, microwave] = index.search(["dielectric constants", "MICROWAVE"], k=10)
    # "constants" matches "constant" only through the stemmer.
    assert ids(corpus, dielectric) == ["d1", "d5"]
    assert set(ids(corpus, microwave)) == {"d1", "d2"}  # "microwaves" stems to "microwav"
    scores = [s for _, s in dielectric]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert index.search(["microwave"], k=1) == [microwave[:1]]


def test_empty_stopword_and_unknown_queries_return_nothing(tmp_path: Path) -> None:
    index = Bm25Index.load_or_build(make_corpus(tmp_path), cache_root=tmp_path / "cache")
    assert index.search(["", "   ", "the of and", "zzzz qqqq", "!!"], k=5) == [[]] * 5
    assert index.search([], k=5) == []
    assert index.search(["microwave"], k=0) == [[]]
    assert len(index.search(["data coding digital"], k=100)[0]) == 2  # k > matches is fine


def test_corpus_without_a_searchable_word_is_a_clear_error(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path, [("a", ""), ("b", "the of and")])
    with pytest.raises(CorpusError, match="no document has a searchable word"):
        Bm25Index.load_or_build(corpus, cache_root=tmp_path / "cache")


def test_index_is_cached_on_disk_and_not_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = make_corpus(tmp_path)
    cache = tmp_path / "cache"
    built = Bm25Index.load_or_build(corpus, cache_root=cache)
    where = index_dir(corpus, "bm25", cache)
    assert built.path == where
    assert where == cache.resolve() / "indexes" / corpus.fingerprint / "bm25"
    files = {f.name: f.stat().st_mtime_ns for f in where.iterdir()}
    assert "meta.json" in files and "vocab.index.json" in files
    expected = built.search(["dielectric"], k=5)

    # Same process: the memo answers, without touching the disk.
    assert Bm25Index.load_or_build(corpus, cache_root=cache) is built

    # A new process (memo cleared): loaded from disk; building would fail the test.
    Bm25Index.clear_memo()

    def no_build(corpus: Corpus) -> None:
        raise AssertionError("the index was rebuilt")

    monkeypatch.setattr(Bm25Index, "build", staticmethod(no_build))
    loaded = Bm25Index.load_or_build(corpus, cache_root=cache)
    assert loaded is not built
    assert loaded.search(["dielectric"], k=5) == expected
    assert {f.name: f.stat().st_mtime_ns for f in where.iterdir()} == files


def test_changed_corpus_or_stale_index_is_rebuilt(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = make_corpus(tmp_path)
    Bm25Index.load_or_build(first, cache_root=cache)
    second = make_corpus(tmp_path, [*DOCS, ("d6", "plasma physics")])
    assert second.fingerprint != first.fingerprint
    index = Bm25Index.load_or_build(second, cache_root=cache)
    assert ids(second, index.search(["plasma"], k=5)[0]) == ["d6"]

    # An index written by another version (different meta) is replaced, not trusted.
    where = index_dir(second, "bm25", cache)
    meta = json.loads((where / "meta.json").read_text())
    (where / "meta.json").write_text(json.dumps({**meta, "schema": -1}))
    Bm25Index.clear_memo()
    again = Bm25Index.load_or_build(second, cache_root=cache)
    assert ids(second, again.search(["plasma"], k=5)[0]) == ["d6"]
    assert json.loads((where / "meta.json").read_text()) == meta
    assert [p.name for p in where.parent.iterdir()] == ["bm25"]  # no temporary leftovers


def test_ties_are_broken_by_document_order(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path, [("b", "same words here"), ("a", "same words here")])
    index = Bm25Index.load_or_build(corpus, cache_root=tmp_path / "cache")
    ranked = index.search(["words"], k=2)[0]
    assert ids(corpus, ranked) == ["b", "a"]
    assert ranked[0][1] == ranked[1][1]
    assert ids(corpus, index.search(["words"], k=1)[0]) == ["b"]


def test_concurrent_searches_agree(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path)
    cache = tmp_path / "cache"
    with ThreadPoolExecutor(8) as pool:
        indexes = list(pool.map(lambda _: Bm25Index.load_or_build(corpus, cache), range(8)))
    assert all(i is indexes[0] for i in indexes)  # built once, even when asked concurrently
    queries = ["dielectric liquids", "microwave antennas", "data coding", "filters"]
    expected = indexes[0].search(queries, k=3)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: indexes[0].search(queries, k=3), range(50)))
    assert all(r == expected for r in results)


def test_a_weighted_query_sums_weight_times_each_terms_score(tmp_path: Path) -> None:
    index = Bm25Index.load_or_build(make_corpus(tmp_path), cache_root=tmp_path / "cache")
    [plain] = index.search(["dielectric microwave"], k=5)
    terms = index.analyze("dielectric microwave")
    again = index.search_weighted(dict.fromkeys(terms, 1.0), k=5)
    assert [p for p, _ in again] == [p for p, _ in plain]
    assert [s for _, s in again] == pytest.approx([s for _, s in plain])
    [dielectric] = index.search(["dielectric"], k=5)
    [microwave] = index.search(["microwave"], k=5)
    by_doc = {p: 2.0 * s for p, s in dielectric}
    for p, s in microwave:
        by_doc[p] = by_doc.get(p, 0.0) + 0.5 * s
    weighted = index.search_weighted({terms[0]: 2.0, terms[1]: 0.5}, k=5)
    assert dict(weighted) == pytest.approx(by_doc)
    assert index.search_weighted({"zzzz": 1.0, terms[0]: 0.0}, k=5) == []
    assert index.search_weighted(dict.fromkeys(terms, 1.0), k=0) == []
