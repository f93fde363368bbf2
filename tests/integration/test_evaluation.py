"""`run_evaluation` on a tiny TREC collection whose BM25 scores can be worked out by hand.

Every judged query has a word that occurs only in its (first) relevant document, so BM25
ranks a relevant document first on each; the last query has a second relevant document that
shares no word with it, which BM25 (positive scores only) never returns. Hence, for `docs`,
per query: RR@10 = 1 everywhere; AP@100 and R@100 are 1, except 1/2 on the last query;
nDCG@10 is 1, except DCG / IDCG = 1 / (1 + 1 / log2(3)) on the last query.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fanfuse.fusion.fusers import DEFAULT_FUSION, FUSERS, VARIANTS
from fanfuse.retrieval.bm25 import Bm25Index
from fanfuse.retrieval.dense import DenseIndex
from fanfuse.tools.evaluation import evaluate as evaluation
from fanfuse.tools.evaluation.evaluate import METRICS, EvalReport, run_evaluation
from fanfuse.tools.evaluation.pipelines import (
    PERMUTATIONS,
    PRODUCTION_DEPTH,
    mode_pipelines,
    pipelines,
)
from fanfuse.wire.modes import MODES

DOCS = {
    "D01": "Below a critical temperature a superconductor loses all electrical resistance.",
    "D02": "A half wave dipole antenna radiates electromagnetic energy into space.",
    "D03": "Radio waves undergo reflection in the ionosphere during the night.",
    "D04": "A thermionic valve emits electrons from a heated cathode.",
    "D05": "Vacuum tubes amplified weak signals in early wireless receivers.",
    "D06": "Arrays of antenna elements steer the beam of a radar.",
    "D07": "Radar measures distance from the echo delay of short radio pulses.",
    "D08": "A laser produces coherent light by stimulated emission.",
    "D09": "The transistor switches and amplifies currents in circuits.",
    "D10": "Microwaves propagate along a hollow metal waveguide.",
    "D11": "The dielectric constant of liquids is measured at microwave frequencies.",
    "D12": "Plasma is an ionised gas of free electrons and positive ions.",
    "D13": "Band pass filters are designed for a given phase and attenuation.",
    "D14": "A digital computer stores programs and data in memory.",
    "D15": "Error correcting codes protect data sent over noisy channels.",
    "D16": "Ferromagnetic materials keep their magnetisation after the field is removed.",
    "D17": "Doping a semiconductor with impurities changes its conductivity.",
    "D18": "A quartz crystal oscillator gives a stable frequency reference.",
    "D19": "Lenses focus light through refraction at curved surfaces.",
    "D20": "Sound travels through air as small pressure variations.",
    "D21": "Nuclear fission releases energy when heavy nuclei split.",
    "D22": "A battery converts chemical energy into electrical energy.",
    "D23": "Solar cells turn sunlight into electric current.",
    "D24": "Gyroscopes keep their orientation while spinning quickly.",
    "D25": "Seismometers record ground motion during earthquakes.",
    "D26": "Thermocouples measure temperature from a junction voltage.",
    "D27": "Fibre optic cables carry light pulses over long distances.",
    "D28": "Magnetrons generate microwaves for cooking ovens.",
    "D29": "Photomultipliers detect single photons with great gain.",
    "D30": "Hall probes sense magnetic flux density in a gap.",
}


@dataclass(frozen=True)
class Topic:
    text: str
    relevant: tuple[str, ...]
    found_by_bm25: tuple[str, ...]  # the relevant documents sharing a word with the query


TOPICS = {
    "1": Topic("superconductor resistance", ("D01",), ("D01",)),
    "2": Topic("dipole antenna", ("D02",), ("D02",)),  # D06 also says "antenna", ranked below
    "3": Topic("ionosphere radio reflection", ("D03",), ("D03",)),  # D07 also says "radio"
    "4": Topic("thermionic valve", ("D04", "D05"), ("D04",)),  # D05 is a valve in other words
}


def write_collection(
    folder: Path, topics: dict[str, Topic], qrels: list[tuple[str, str]] | None = None
) -> tuple[Path, Path, Path]:
    corpus = folder / "docs.trec"
    corpus.write_text(
        "".join(
            f"<DOC>\n<DOCNO>{doc_id}</DOCNO>\n<TEXT>\n{text}\n</TEXT>\n</DOC>\n"
            for doc_id, text in DOCS.items()
        ),
        encoding="utf-8",
    )
    queries = folder / "topics.trec"
    queries.write_text(
        "".join(
            f"<top>\n<num>{qid}</num><title>\n{topic.text}\n</title>\n</top>\n"
            for qid, topic in topics.items()
        ),
        encoding="utf-8",
    )
    if qrels is None:
        qrels = [(qid, doc) for qid, topic in TOPICS.items() for doc in topic.relevant]
    judgements = folder / "qrels"
    judgements.write_text("".join(f"{qid} 0 {doc} 1\n" for qid, doc in qrels), encoding="utf-8")
    return corpus, queries, judgements


def expected_docs_metrics() -> dict[str, float]:
    """The BM25 run's means, from the design of TOPICS (see the module docstring)."""
    per_query: dict[str, list[float]] = {name: [] for name in METRICS}
    for topic in TOPICS.values():
        found, relevant = len(topic.found_by_bm25), len(topic.relevant)
        # The found relevant documents are ranks 1..found: precision 1 at each.
        dcg = sum(1 / math.log2(rank + 1) for rank in range(1, found + 1))
        idcg = sum(1 / math.log2(rank + 1) for rank in range(1, relevant + 1))
        per_query["nDCG@10"].append(dcg / idcg)
        per_query["AP@100"].append(found / relevant)
        per_query["RR@10"].append(1.0)
        per_query["R@100"].append(found / relevant)
    return {name: sum(values) / len(values) for name, values in per_query.items()}


def fuser_names() -> list[str]:
    return [method.value for method in FUSERS] + list(VARIANTS)


REQUERY_ROWS = [
    ("rrf@10(docs+rm3)", "requery"),
    ("rrf@10(docs+rm3(fused))", "requery"),
    ("docs+rm3", "requery"),
    ("rrf@100(docs+rm3)", "requery"),
    ("docs+rm3(fused)", "requery"),
    ("rrf@100(docs+rm3(fused))", "requery"),
]


def rows_after_the_fusers(depth: int = 100) -> list[tuple[str, str]]:
    """Depths, fusers at the production depth, rerankers, a row per search mode, then
    re-querying, in report order."""
    modes = [(p.name, "mode") for p in mode_pipelines() if p.depth <= depth]
    return [(p.name, kind) for p, kind in pipelines(depth)] + modes + REQUERY_ROWS


@pytest.fixture(autouse=True)
def _fresh_memos() -> None:
    Bm25Index.clear_memo()
    DenseIndex.clear_memo()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FANFUSE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def full_report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvalReport]:
    """One evaluation with both platforms (the model loads and the corpus is encoded once)."""
    folder = tmp_path_factory.mktemp("collection")
    Bm25Index.clear_memo()
    DenseIndex.clear_memo()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FANFUSE_CACHE_DIR", str(folder / "cache"))
        yield run_evaluation(*write_collection(folder, TOPICS), show_progress=False)


def check_metrics(metrics: dict[str, float]) -> None:
    assert list(metrics) == list(METRICS) == ["nDCG@10", "AP@100", "RR@10", "R@100"]
    assert all(0.0 <= value <= 1.0 for value in metrics.values()), metrics


@pytest.mark.slow
def test_the_report_has_every_platform_and_fuser(full_report: EvalReport) -> None:
    report = full_report
    assert (report.corpus, report.documents) == ("docs", len(DOCS))
    assert report.queries == len(TOPICS) and report.notes == []
    assert [(run.name, run.kind) for run in report.runs] == [
        ("docs", "platform"),
        ("vectors", "platform"),
        *((name, "fuser") for name in fuser_names()),
        *rows_after_the_fusers(),
    ]
    defaults = [run for run in report.runs if run.default]
    assert [(run.name, run.kind) for run in defaults] == [(DEFAULT_FUSION.value, "fuser")]
    for run in report.runs:
        check_metrics(run.metrics)


@pytest.mark.slow
def test_metrics_match_the_values_worked_out_by_hand(full_report: EvalReport) -> None:
    runs = {run.name: run.metrics for run in full_report.runs}
    assert runs["docs"] == pytest.approx(expected_docs_metrics(), abs=1e-9)
    assert runs["docs"]["RR@10"] == 1.0
    # Dense scores every document, and the corpus is smaller than the depth: each list
    # holds every relevant document, so recall is exactly 1 for vectors and every fuser.
    assert len(DOCS) <= full_report.depth
    for name in ["vectors", *fuser_names()]:
        assert runs[name]["R@100"] == 1.0, name


def test_without_vectors_every_fuser_reproduces_docs(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evaluation, "dense_unavailable_reason", lambda: "not installed: torch")
    unjudged = {**TOPICS, "5": Topic("gyroscopes spinning", (), ())}  # a topic with no qrels
    report = run_evaluation(*write_collection(tmp_path, unjudged), show_progress=False)
    assert [(run.name, run.kind) for run in report.runs] == [
        ("docs", "platform"),
        *((name, "fuser") for name in fuser_names()),
        *rows_after_the_fusers(),
    ]
    assert [run.name for run in report.runs if run.default] == [DEFAULT_FUSION.value]
    docs = report.runs[0].metrics
    check_metrics(docs)
    # Topic 5 is neither scored nor counted as 0: the means are those of the judged topics.
    assert report.queries == len(TOPICS)
    assert docs == pytest.approx(expected_docs_metrics(), abs=1e-9)
    # One platform: every fuser at every depth shows docs' list (never 10 results here).
    assert all(run.metrics == docs for run in report.runs if run.kind == "fuser")
    assert any("vectors not evaluated: not installed: torch" in n for n in report.notes)
    assert any("1 queries have no judgements" in n for n in report.notes)
    assert list((cache / "indexes").glob("*/bm25/meta.json"))  # the cache stayed in tmp


@pytest.mark.parametrize("missing", ["corpus", "queries", "qrels"])
def test_a_missing_file_is_a_clear_error_naming_it(
    tmp_path: Path, cache: Path, missing: str
) -> None:
    names = ("corpus", "queries", "qrels")
    paths = dict(zip(names, write_collection(tmp_path, TOPICS), strict=True))
    paths[missing] = tmp_path / f"no-such-{missing}"
    with pytest.raises((ValueError, OSError), match=f"no-such-{missing}"):
        run_evaluation(paths["corpus"], paths["queries"], paths["qrels"], show_progress=False)


def test_a_malformed_qrels_file_is_a_clear_error_naming_it(tmp_path: Path, cache: Path) -> None:
    corpus, queries, qrels = write_collection(tmp_path, TOPICS)
    qrels.write_text("1 0 D01\n", encoding="utf-8")  # three columns: no relevance
    with pytest.raises(ValueError, match=re.escape(f"{qrels}: not a TREC qrels file")):
        run_evaluation(corpus, queries, qrels, show_progress=False)


def test_qrels_naming_unknown_queries_is_a_clear_error_naming_it(
    tmp_path: Path, cache: Path
) -> None:
    judged = [(qid, doc) for qid, topic in TOPICS.items() for doc in topic.relevant]
    corpus, queries, qrels = write_collection(tmp_path, TOPICS, [*judged, ("99", "D01")])
    expected = f"{qrels}: judgements for 1 queries that are not in {queries}: 99"
    with pytest.raises(ValueError, match=re.escape(expected)):
        run_evaluation(corpus, queries, qrels, show_progress=False)


@pytest.mark.slow
def test_every_row_but_the_platforms_is_compared_query_by_query(full_report: EvalReport) -> None:
    names = {run.name for run in full_report.runs}
    for run in full_report.runs:
        if run.kind == "platform":
            assert run.comparisons == [], run.name
            continue
        assert run.depth in (10, 30, 50, 100), run.name
        assert run.comparisons or run.name == "rrf@10", run.name
        for c in run.comparisons:
            assert c.baseline in names and c.baseline != run.name
            assert c.measure == "nDCG@10"
            assert c.wins + c.losses + c.ties == full_report.queries
            assert 1 / (PERMUTATIONS + 1) <= c.p_value <= 1.0
    by_name = {run.name: run for run in full_report.runs}
    # Rows at 10 are compared with RRF at 10 once; deeper rows with RRF at theirs and at 10.
    assert [c.baseline for c in by_name["pool_rm3@10"].comparisons] == ["rrf@10"]
    assert [c.baseline for c in by_name["pool_rm3@100"].comparisons] == ["rrf", "rrf@10"]
    assert [c.baseline for c in by_name["docs+rm3"].comparisons] == ["docs"]


def test_a_row_per_mode_at_the_modes_depth(full_report: EvalReport) -> None:
    rows = {run.name: run for run in full_report.runs}
    for mode, spec in MODES.items():
        row = rows[f"mode:{mode.value}"]
        assert (row.kind, row.depth) == ("mode", spec.depth(PRODUCTION_DEPTH))
        if not spec.rerank:  # no reranker: exactly the default fuser at that depth
            assert row.metrics == rows[f"{DEFAULT_FUSION.value}@{row.depth}"].metrics
