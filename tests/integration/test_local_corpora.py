"""Named local corpora (platforms/corpora.py): a folder indexed under a name becomes platforms
the registry offers; indexing again reads and encodes only what changed; a search reads what
was indexed; a name is refused when it would shadow a platform; `forget` cleans up."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fanfuse.platforms import Registry
from fanfuse.platforms.corpora import (
    descriptions,
    forget,
    index_local,
    local_platforms,
    name_for,
    registered,
    snapshot_path,
)
from fanfuse.platforms.docs import DocsPlatform
from fanfuse.retrieval.bm25 import Bm25Index
from fanfuse.rules.health import COLD_START
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.errors import CorpusError

NOTES = {
    "kayak.md": "# Kayak trip\n\nPaddling the fjord in July.\n",
    "bread.md": "---\ntitle: Sourdough\n---\nFeed the starter daily.\n",
    "sub/budget.txt": "Budget review\n\nTravel costs by Friday.\n",
    "blank.md": "   \n",
}


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "My Notes"
    for name, text in NOTES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("FANFUSE_"):
            monkeypatch.delenv(name)
    root = tmp_path / "cache"
    monkeypatch.setenv("FANFUSE_CACHE_DIR", str(root))
    monkeypatch.setenv("FANFUSE_DB_PATH", str(tmp_path / "state.db"))
    Bm25Index.clear_memo()
    return root


def test_a_name_follows_the_folder_and_must_be_a_platform_name(notes: Path, cache: Path) -> None:
    assert name_for(notes) == "my_notes"
    assert name_for(notes / "kayak.md") == "kayak"
    with pytest.raises(CorpusError, match="give one with --name"):
        name_for(notes.parent / "2024")
    with pytest.raises(CorpusError, match="lower-case letter"):
        index_local(notes, "Notes!", cache, dense=False)
    with pytest.raises(CorpusError, match="'docs' is taken by a platform"):
        index_local(notes, "docs", cache, dense=False, reserved={"docs", "vectors"})
    index_local(notes, "notes", cache, dense=False)
    with pytest.raises(CorpusError, match="'notes_vectors' is taken"):
        index_local(notes, "notes_vectors", cache, dense=False, reserved=())
    assert [c.name for c in registered(cache)] == ["notes"]


def test_indexing_again_reads_only_the_files_that_changed(notes: Path, cache: Path) -> None:
    first = index_local(notes, "notes", cache, dense=False)
    assert first.read == 4 and sorted(first.added) == ["bread.md", "kayak.md", "sub/budget.txt"]
    assert first.corpus.documents == 3 and first.dense_skipped is None and not first.corpus.dense
    unchanged = index_local(notes, "notes", cache, dense=False)
    assert unchanged.read == 0 and unchanged.unchanged == 3
    assert unchanged.corpus.fingerprint == first.corpus.fingerprint

    (notes / "new.md").write_text("# New note\n\nAbout kayaks.\n")
    (notes / "sub" / "budget.txt").write_text("Budget review\n\nMoved to Monday.\n")
    (notes / "bread.md").unlink()
    again = index_local(notes, "notes", cache, dense=False)
    assert (again.added, again.changed, again.removed) == (
        ["new.md"],
        ["sub/budget.txt"],
        ["bread.md"],
    )
    assert again.read == 2 and again.unchanged == 1
    # The replaced snapshot's indexes are gone; the new one's are there.
    indexes = cache.resolve() / "indexes"
    assert not (indexes / first.corpus.fingerprint).exists()
    assert (indexes / again.corpus.fingerprint / "bm25" / "meta.json").is_file()


async def test_the_registry_offers_it_and_a_search_reads_what_was_indexed(
    notes: Path, cache: Path
) -> None:
    index_local(notes, "notes", cache, dense=False)
    assert list(local_platforms(cache)) == ["notes"]  # no dense index built: no notes_vectors
    registry = Registry.from_settings(Settings())
    assert "notes" in registry.available() and "notes_vectors" not in registry.names()
    folder = notes.resolve()  # noqa: ASYNC240 (a test's setup, nothing else runs)
    assert descriptions(cache)["notes"].startswith(f"BM25 over {folder} (3 documents")
    platform = registry.get("notes")
    assert isinstance(platform, DocsPlatform)
    assert platform.settings().corpus == snapshot_path(cache, "notes")

    (notes / "late.md").write_text("# Kayak late\n\nkayak kayak kayak\n")  # not indexed yet
    async with EmbeddedRuntime(Settings()) as rt:
        first = await rt.search(query="kayak", platform="notes")
        second = await rt.search(query="kayak fjord", platform="notes")
    urls = [r.url for r in first.results]
    assert urls == [(notes / "kayak.md").as_uri()]  # the snapshot: late.md is not in it
    assert first.results[0].title == "Kayak trip"
    # The first search in this process loaded the index: its cold start, not its latency.
    [run1], [run2] = first.platform_runs, second.platform_runs
    assert COLD_START in run1.timings and COLD_START not in run2.timings


def test_a_trec_file_and_forget(tmp_path: Path, cache: Path) -> None:
    trec = tmp_path / "lab.trec"
    trec.write_text("<DOC><DOCNO>D1</DOCNO><TEXT>Microwave waveguides.</TEXT></DOC>\n")
    report = index_local(trec, name_for(trec), cache, dense=False)
    assert report.corpus.kind == "file" and report.corpus.documents == 1
    gone = forget("lab", cache)
    assert gone.source == trec.resolve()
    assert registered(cache) == [] and not snapshot_path(cache, "lab").exists()
    assert not (cache.resolve() / "indexes" / report.corpus.fingerprint).exists()
    with pytest.raises(CorpusError, match="no local corpus named 'lab' \\(registered: none\\)"):
        forget("lab", cache)
    assert trec.exists()


def test_errors_name_the_folder(tmp_path: Path, cache: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CorpusError, match=r"no \.txt or \.md files"):
        index_local(empty, "empty", cache, dense=False)
    (empty / "a.md").write_text(" \n")
    with pytest.raises(CorpusError, match=r"every \.txt/\.md file in the folder is empty"):
        index_local(empty, "empty", cache, dense=False)
    with pytest.raises(CorpusError, match="no such file or folder"):
        index_local(tmp_path / "nowhere", "nowhere", cache, dense=False)
    assert registered(cache) == []
