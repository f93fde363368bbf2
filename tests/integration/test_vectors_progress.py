"""`vectors` reports its first (cold-cache) encoding of the corpus as platform progress."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from fanfuse.platforms import Registry
from fanfuse.platforms.contract import PlatformContext, SearchParams
from fanfuse.platforms.vectors import VectorsPlatform, VectorsSettings
from fanfuse.retrieval import embeddings, index_dir, read_meta
from fanfuse.retrieval.corpus import Corpus, load_corpus
from fanfuse.retrieval.dense import KIND, DenseIndex
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.models import PlatformState, TaskStatus

pytestmark = pytest.mark.slow

TEXTS = [
    "A laser emits coherent light by stimulated emission of radiation.",
    "The transistor amplifies and switches electronic signals in circuits.",
    "Microwaves propagate along a hollow metal waveguide.",
    "Measuring the dielectric constant of liquids at microwave frequencies.",
    "Plasma is an ionised gas of electrons and positive ions.",
    "Below a critical temperature a superconductor has zero resistance.",
    "A dipole antenna radiates electromagnetic waves.",
    "Band pass filters are designed with given phase and attenuation.",
    "A digital computer stores programs and data in memory.",
    "Error correcting codes protect data sent over noisy channels.",
    "Ferromagnetic materials keep their magnetisation after the field is removed.",
    "Doping a semiconductor with impurities changes its conductivity.",
    "A crystal oscillator produces a stable frequency reference.",
    "Radio waves are reflected by the ionosphere at night.",
]
CHUNK = 3  # documents per encoding step here, so that a tiny corpus takes several steps

Report = tuple[int, int, str]


@pytest.fixture
def corpus_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    DenseIndex.clear_memo()
    path = tmp_path / "notes.jsonl"
    rows = [{"id": f"n{i}", "title": "", "text": text} for i, text in enumerate(TEXTS)]
    path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    monkeypatch.setenv("FANFUSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FANFUSE_VECTORS_CORPUS", str(path))
    monkeypatch.setattr(embeddings, "CHUNK", CHUNK)
    return path


@pytest.fixture
def corpus(corpus_path: Path) -> Corpus:
    return load_corpus(corpus_path)


def recording_context(
    platform: VectorsPlatform, reports: list[Report]
) -> PlatformContext[VectorsSettings]:
    def report(current: int, total: int, message: str) -> None:
        reports.append((current, total, message))

    return PlatformContext(settings=platform.load_settings(), report=report)


def check_encoding_reports(reports: list[Report], documents: int) -> None:
    """From 0 to every document, strictly increasing, one step per chunk, all of one total."""
    assert reports, "no progress was reported"
    currents = [current for current, _, _ in reports]
    assert currents[0] == 0 and currents[-1] == documents
    assert all(a < b for a, b in itertools.pairwise(currents))
    assert len(reports) == 1 + -(-documents // CHUNK)
    for current, total, message in reports:
        assert total == documents
        assert message == f"encoding corpus {current}/{total}"


async def test_cold_cache_reports_encoding_progress_then_warm_cache_reports_none(
    corpus: Corpus,
) -> None:
    platform = VectorsPlatform()
    params = SearchParams(queries=["coherent light amplification"], limit=3)
    cold: list[Report] = []
    [hits] = await platform.search(recording_context(platform, cold), params)
    check_encoding_reports(cold, len(corpus))
    assert hits[0].metadata["doc_id"] == "n0"

    DenseIndex.clear_memo()  # a new process: the embeddings come from the disk cache
    warm: list[Report] = []
    [again] = await platform.search(recording_context(platform, warm), params)
    assert warm == []
    assert [h.url for h in again] == [h.url for h in hits]


async def test_a_cancelled_search_stops_reporting_but_the_encoding_completes(
    corpus: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform = VectorsPlatform()
    loop = asyncio.get_running_loop()
    resume = threading.Event()
    reports: list[Report] = []
    search: asyncio.Task[Any] | None = None

    def report(current: int, total: int, message: str) -> None:
        reports.append((current, total, message))
        if len(reports) == 1:  # in the worker thread: cancel the search, wait until it is
            assert search is not None
            loop.call_soon_threadsafe(search.cancel)
            assert resume.wait(timeout=30)

    ctx = PlatformContext(settings=platform.load_settings(), report=report)
    search = asyncio.create_task(platform.search(ctx, SearchParams(queries=["laser"], limit=1)))
    with pytest.raises(asyncio.CancelledError):
        await search
    resume.set()

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("the corpus was encoded twice")

    monkeypatch.setattr(DenseIndex, "build", staticmethod(no_build))
    # Waits for the worker thread (it holds the memo lock), then returns what it built.
    index = await asyncio.to_thread(DenseIndex.load_or_build, corpus, None, False)
    assert index.embeddings.shape[0] == len(corpus)
    assert read_meta(index_dir(corpus, KIND)) is not None  # cached for the next search
    assert reports == [(0, len(corpus), f"encoding corpus 0/{len(corpus)}")]


class RecordingStore(SqliteStore):
    """The real SQLite store, keeping every progress patch of every platform document."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.patches: list[tuple[str, dict[str, Any], str]] = []

    def patch_run(
        self, task_id: str, name: str, fields: dict[str, Any], *, lease: str | None
    ) -> bool:
        self.patches.append((name, fields, threading.current_thread().name))
        return super().patch_run(task_id, name, fields, lease=lease)


async def test_the_service_writes_encoding_progress_to_the_platform_document(
    corpus: Corpus, tmp_path: Path
) -> None:
    settings = Settings(db_path=tmp_path / "fanfuse.db", progress_interval=0.0)
    store = RecordingStore(settings.db_path)
    async with EmbeddedRuntime(settings, registry=Registry(), store=store) as runtime:
        view = await runtime.search({"query": "radio echoes", "platform": "vectors"})
    assert view.status is TaskStatus.COMPLETED
    [run] = view.platform_runs
    assert run.state is PlatformState.SUCCEEDED and run.message.startswith("Searching: Found")
    encoding = [
        (fields, thread)
        for name, fields, thread in store.patches
        if name == "vectors" and "encoding corpus" in fields.get("message", "")
    ]
    currents = [fields["progress"]["current"] for fields, _ in encoding]
    assert currents == sorted(currents) and currents[-1] == len(corpus)
    assert {fields["progress"]["total"] for fields, _ in encoding} == {len(corpus)}
    assert encoding[-1][0]["message"] == f"Searching: encoding corpus {len(corpus)}/{len(corpus)}"
    # Written from the worker thread that encodes, not from the event loop's thread.
    assert threading.main_thread().name not in {thread for _, thread in encoding}
