"""The `docs` and `vectors` platforms end to end on small corpora named by environment."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fanfuse.platforms.contract import PlatformContext, SearchParams
from fanfuse.platforms.docs import DocsPlatform, DocsSettings
from fanfuse.platforms.vectors import VectorsPlatform
from fanfuse.retrieval.bm25 import Bm25Index
from fanfuse.retrieval.dense import DenseIndex
from fanfuse.wire.errors import ProviderError
from fanfuse.wire.models import Hit

ROWS = [
    {
        "id": "d1",
        "title": "Dielectrics",
        "text": "Dielectric constant of liquids at microwave "
        "frequencies, measured in a resonant cavity. " + "More detail follows. " * 30,
    },
    {
        "id": "d2",
        "title": "Waveguides",
        "text": "Microwave radiation fed through waveguides.",
        "url": "https://example.org/papers/d2",
    },
    {"id": "d3", "title": "Filters", "text": "Digital computers design band pass filters."},
    {"id": "d4", "title": "Coding", "text": "Data coding for information transfer."},
]


@pytest.fixture(autouse=True)
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    Bm25Index.clear_memo()
    DenseIndex.clear_memo()
    corpus = tmp_path / "lab.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in ROWS), encoding="utf-8")
    monkeypatch.setenv("FANFUSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FANFUSE_DOCS_CORPUS", str(corpus))
    monkeypatch.setenv("FANFUSE_VECTORS_CORPUS", str(corpus))
    return corpus


def check_hits(hits: list[Hit], query_index: int, content: bool) -> None:
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(h.query_index == query_index for h in hits)
    scores = [h.score for h in hits if h.score is not None]
    assert len(scores) == len(hits)
    assert scores == sorted(scores, reverse=True)
    for hit in hits:
        assert hit.metadata["corpus"] == "lab"
        assert hit.title and hit.url.startswith("https://")
        assert len(hit.snippet) <= 301
        assert (hit.content is not None) is content


async def test_docs_platform_searches_the_configured_corpus(tmp_path: Path) -> None:
    platform = DocsPlatform()
    assert platform.availability() is None
    settings = platform.load_settings()
    assert isinstance(settings, DocsSettings) and settings.corpus == tmp_path / "lab.jsonl"
    params = SearchParams(queries=["microwave", "zzzz nothing"], limit=1, include_content=True)
    microwave, nothing = await platform.search(PlatformContext(settings=settings), params)
    assert nothing == []
    check_hits(microwave, 0, content=True)
    assert len(microwave) == 1  # limited to params.limit
    params = SearchParams(queries=["data", "microwave waveguides"], limit=10)
    data, waves = await platform.search(PlatformContext(settings=settings), params)
    check_hits(data, 0, content=False)
    check_hits(waves, 1, content=False)
    assert [h.metadata["doc_id"] for h in data] == ["d4"]
    assert data[0].url == "https://lab.local/doc/d4"
    top = waves[0]
    assert top.metadata["doc_id"] == "d2" and top.url == "https://example.org/papers/d2"
    d1 = next(h for h in waves if h.metadata["doc_id"] == "d1")
    assert d1.snippet.endswith("…") and len(d1.snippet) <= 301
    # The index went to FANFUSE_CACHE_DIR, built once.
    assert list((tmp_path / "cache" / "indexes").glob("*/bm25/meta.json"))


async def test_docs_platform_defaults_to_vaswani(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FANFUSE_DOCS_CORPUS")
    platform = DocsPlatform()
    ctx = PlatformContext(settings=platform.load_settings())
    params = SearchParams(queries=["microwave dielectric constant"], limit=5)
    [hits] = await platform.search(ctx, params)
    assert len(hits) == 5
    assert hits[0].metadata["corpus"] == "vaswani"
    assert hits[0].url == f"https://vaswani.local/doc/{hits[0].metadata['doc_id']}"


async def test_docs_platform_reports_bad_corpora(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FANFUSE_DOCS_CORPUS", str(tmp_path / "missing.trec"))
    platform = DocsPlatform()
    assert "corpus not found" in (platform.availability() or "")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "1", "text": "ok"}\n{"id": 2\n', encoding="utf-8")
    monkeypatch.setenv("FANFUSE_DOCS_CORPUS", str(broken))
    with pytest.raises(ProviderError, match=r"broken.jsonl:2: invalid JSON"):
        await platform.search(
            PlatformContext(settings=platform.load_settings()),
            SearchParams(queries=["x"], limit=3),
        )


def test_offline_modules_do_not_import_torch() -> None:
    code = (
        "import sys\n"
        "import fanfuse.platforms.docs, fanfuse.platforms.vectors\n"
        "import fanfuse.tools.evaluation.evaluate\n"
        "from fanfuse.retrieval.dense import dense_unavailable_reason\n"
        "from fanfuse.platforms.vectors import VectorsPlatform\n"
        "assert dense_unavailable_reason() is None\n"
        "assert VectorsPlatform().availability() is None\n"
        "heavy = {'torch', 'sentence_transformers', 'transformers'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
async def test_vectors_platform_and_docs_run_concurrently(tmp_path: Path) -> None:
    vectors, docs = VectorsPlatform(), DocsPlatform()
    assert vectors.availability() is None
    params = SearchParams(queries=["electromagnetic waves in metal tubes"], limit=2)
    [dense_hits], [bm25_hits] = await asyncio.gather(
        vectors.search(PlatformContext(settings=vectors.load_settings()), params),
        docs.search(PlatformContext(settings=docs.load_settings()), params),
    )
    check_hits(dense_hits, 0, content=False)
    assert len(dense_hits) == 2
    assert dense_hits[0].metadata["doc_id"] == "d2"
    assert all(-1.0 <= (h.score or 0.0) <= 1.0 for h in dense_hits)
    assert bm25_hits == []  # no query word occurs in the corpus: only dense finds it
    assert list((tmp_path / "cache" / "indexes").glob("*/dense-all-minilm-l6-v2/embeddings.npy"))
