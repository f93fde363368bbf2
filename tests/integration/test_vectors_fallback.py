"""When the bundled corpus's shipped embeddings do not fit (another model, another corpus), a
`vectors` search answers from BM25 at once and says so, while the corpus is encoded in the
background; the next search after that answers from the vectors, and the stand-in answer was
never cached as `vectors`' own."""

from __future__ import annotations

from pathlib import Path

import pytest

from fanfuse.platforms import Registry
from fanfuse.platforms.contract import PlatformContext, SearchParams
from fanfuse.platforms.vectors import FALLBACK_PROVIDER, VectorsPlatform
from fanfuse.retrieval import bundle, dense
from fanfuse.retrieval import corpus as corpus_module
from fanfuse.retrieval.corpus import load_corpus
from fanfuse.retrieval.dense import DenseIndex
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings

pytestmark = pytest.mark.slow

DOCS = [
    "A laser emits coherent light by stimulated emission of radiation.",
    "The transistor amplifies and switches electronic signals in circuits.",
    "Microwaves propagate along a hollow metal waveguide.",
    "Measuring the dielectric constant of liquids at microwave frequencies.",
    "Plasma is an ionised gas of electrons and positive ions.",
    "Below a critical temperature a superconductor has zero resistance.",
]


@pytest.fixture
def bundled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small 'bundled' corpus whose shipped embeddings are missing (the check fails)."""
    data = tmp_path / "data"
    data.mkdir()
    trec = "".join(f"<DOC>\n<DOCNO>d{i}</DOCNO>\n{text}\n</DOC>\n" for i, text in enumerate(DOCS))
    (data / "doc-text.trec").write_text(trec, encoding="utf-8")
    monkeypatch.setattr(corpus_module, "DATA_DIR", data)
    monkeypatch.setattr(bundle, "BUNDLE", data / f"{dense.KIND}.npz")  # no such file
    monkeypatch.setenv("FANFUSE_CACHE_DIR", str(tmp_path / "cache"))
    DenseIndex.clear_memo()
    return data / "doc-text.trec"


async def test_bm25_answers_at_once_then_the_vectors_once_encoded(bundled: Path) -> None:
    platform = VectorsPlatform()
    params = SearchParams(queries=["coherent light amplification"], limit=3)
    ctx = PlatformContext(settings=platform.load_settings())
    [first] = await platform.search(ctx, params)
    assert ctx.record.provider == FALLBACK_PROVIDER and ctx.record.provisional
    assert first and all(hit.metadata["retrieval"] == "bm25" for hit in first)

    corpus = load_corpus()
    building = DenseIndex.building(corpus)
    assert building is not None
    building.join(timeout=120)
    assert not building.is_alive()

    again = PlatformContext(settings=platform.load_settings())
    [second] = await platform.search(again, params)
    assert again.record.provider is None and not again.record.provisional
    assert second[0].metadata["doc_id"] == "d0" and "retrieval" not in second[0].metadata
    assert second[0].score is not None and 0 < second[0].score <= 1  # a cosine, not BM25


async def test_the_stand_in_answer_is_reported_and_never_cached(
    bundled: Path, tmp_path: Path
) -> None:
    settings = Settings(db_path=tmp_path / "fanfuse.db")
    async with EmbeddedRuntime(settings, registry=Registry()) as runtime:
        view = await runtime.search({"query": "superconductor", "platform": "vectors"})
        [run] = view.platform_runs
        assert run.provider == FALLBACK_PROVIDER
        building = DenseIndex.building(load_corpus())
        assert building is not None
        building.join(timeout=120)
        later = await runtime.search({"query": "superconductor", "platform": "vectors"})
        [run] = later.platform_runs
        assert run.provider is None  # the vectors answered: the BM25 answer was not cached
        assert later.results[0].url.endswith("/d5")
