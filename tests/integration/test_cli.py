"""The `fanfuse` command through typer's CliRunner, on a tiny corpus, with state kept in tmp."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click
import pytest
from typer.testing import CliRunner, Result

from fanfuse.cli import app
from fanfuse.corpus import load_corpus
from fanfuse.platforms import Registry
from fanfuse.request import MAX_QUERIES
from fanfuse.retrieval import index_dir
from fanfuse.retrieval.bm25 import KIND as BM25_KIND
from fanfuse.retrieval.bm25 import Bm25Index
from fanfuse.retrieval.dense import KIND as DENSE_KIND
from fanfuse.retrieval.dense import DenseIndex

DOCS = {
    "D1": "Microwave radiation fed through a rectangular waveguide.",
    "D2": "The dielectric constant of liquids measured at microwave frequencies.",
    "D3": "A laser produces coherent light by stimulated emission.",
    "D4": "Semiconductor lasers emit light from a forward biased junction.",
    "D5": "Plasma waves propagate in the ionosphere.",
    "D6": "Error correcting codes protect data on noisy channels.",
    "D7": "A digital computer stores programs and data in memory.",
    "D8": "Band pass filters shape the phase and attenuation of signals.",
}
TOPICS = {"1": "microwave waveguide", "2": "laser light", "3": "noisy channels"}
QRELS = [("1", "D1"), ("1", "D2"), ("2", "D3"), ("2", "D4"), ("3", "D6")]

runner = CliRunner()


@pytest.fixture(autouse=True)
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Only the variables set here: no provider keys, extra or deployed platforms leak in."""
    for name in list(os.environ):
        if name.startswith("FANFUSE_"):
            monkeypatch.delenv(name)
    Bm25Index.clear_memo()
    DenseIndex.clear_memo()
    corpus = tmp_path / "lab.trec"
    corpus.write_text(
        "".join(
            f"<DOC>\n<DOCNO>{doc_id}</DOCNO>\n<TEXT>{text}</TEXT>\n</DOC>\n"
            for doc_id, text in DOCS.items()
        ),
        encoding="utf-8",
    )
    monkeypatch.setenv("FANFUSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FANFUSE_DB_PATH", str(tmp_path / "state" / "fanfuse.db"))
    monkeypatch.setenv("FANFUSE_DOCS_CORPUS", str(corpus))
    monkeypatch.setenv("FANFUSE_VECTORS_CORPUS", str(corpus))
    return corpus


def invoke(*args: str) -> Result:
    return runner.invoke(app, list(args))


def error_line(result: Result) -> str:
    """The one line a failing command prints (on stderr), without styling."""
    assert result.exit_code != 0, result.output
    assert result.stdout == ""
    lines = [line for line in click.unstyle(result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    return lines[0]


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_search_json_prints_the_completed_task(tmp_path: Path) -> None:
    task = ok_json(invoke("search", "microwave waveguide", "--platform", "docs", "--json"))
    assert task["status"] == "completed"
    assert task["queries"] == ["microwave waveguide"] and task["platforms"] == ["docs"]
    results = task["results"]
    assert results and len(results) <= task["request"]["max_results"]
    assert [r["rank"] for r in results] == list(range(1, len(results) + 1))
    top = results[0]
    assert top["url"] == load_corpus(tmp_path / "lab.trec").docs[0].url  # D1 has both words
    assert top["platform"] == "docs" and top["platforms"] == ["docs"]
    assert task["results_by_query"] == []
    [run] = task["platform_runs"]
    assert run["name"] == "docs" and run["state"] == "succeeded"
    assert (tmp_path / "state" / "fanfuse.db").is_file()  # FANFUSE_DB_PATH was used


def test_search_without_json_prints_a_results_table() -> None:
    result = invoke("search", "laser light", "-p", "docs", "-n", "2")
    assert result.exit_code == 0, result.output
    text = click.unstyle(result.stdout)
    assert "https://lab.local/doc/D3" in text
    assert "completed: Search completed: 2 results" in text


def test_unknown_platform_is_one_error_line_naming_the_available_ones() -> None:
    available = Registry().available()
    assert available == ["docs", "vectors"]
    line = error_line(invoke("search", "q", "--platform", "nope", "--json"))
    assert "'nope'" in line
    assert f"available: {', '.join(available)}" in line


def test_too_many_queries_is_one_error_line() -> None:
    queries = [f"query {i}" for i in range(MAX_QUERIES + 1)]
    line = error_line(invoke("search", *queries, "--platform", "docs"))
    assert f"at most {MAX_QUERIES} queries" in line and f"got {len(queries)}" in line


def test_two_queries_give_one_list_each_and_a_fused_one() -> None:
    queries = ["microwave", "laser"]
    task = ok_json(invoke("search", *queries, "-p", "docs", "--json"))
    assert task["status"] == "completed"
    by_query = task["results_by_query"]
    assert [entry["query"] for entry in by_query] == queries
    microwave, laser = ([r["url"] for r in entry["results"]] for entry in by_query)
    assert microwave and laser and not set(microwave) & set(laser)
    assert {r["url"] for r in task["results"]} == set(microwave) | set(laser)


@pytest.mark.slow
def test_two_queries_over_docs_and_vectors() -> None:
    queries = ["microwave waveguide", "coherent light"]
    task = ok_json(invoke("search", *queries, "-p", "docs, vectors", "-n", "3", "--json"))
    assert task["status"] == "completed" and task["platforms"] == ["docs", "vectors"]
    assert [entry["query"] for entry in task["results_by_query"]] == queries
    for entry in task["results_by_query"]:
        assert 0 < len(entry["results"]) <= 3
    assert any(len(r["platforms"]) == 2 for r in task["results"])  # found by both
    assert {run["name"]: run["state"] for run in task["platform_runs"]} == {
        "docs": "succeeded",
        "vectors": "succeeded",
    }


def test_platforms_json_lists_availability_and_reasons() -> None:
    rows = ok_json(invoke("platforms", "--json"))
    assert [row["name"] for row in rows] == Registry().names()
    by_name = {row["name"]: row for row in rows}
    for name in ("docs", "vectors"):
        assert by_name[name] == {"name": name, "available": True, "reason": None}
    others = [row for row in rows if row["name"] not in ("docs", "vectors")]
    assert others
    for row in others:
        assert row["available"] is False
        assert isinstance(row["reason"], str) and row["reason"], row
    # Web platforms say which settings they miss, by their environment variable.
    assert "FANFUSE_GOOGLE_API_KEY" in by_name["google"]["reason"]


def test_index_without_dense_builds_the_bm25_cache(env: Path, tmp_path: Path) -> None:
    result = invoke("index", str(env), "--no-dense")
    assert result.exit_code == 0, result.output
    corpus, cache = load_corpus(env), tmp_path / "cache"
    assert (index_dir(corpus, BM25_KIND, cache) / "meta.json").is_file()
    assert not index_dir(corpus, DENSE_KIND, cache).exists()


@pytest.mark.slow
def test_index_builds_both_caches(env: Path, tmp_path: Path) -> None:
    result = invoke("index", str(env))
    assert result.exit_code == 0, result.output
    corpus, cache = load_corpus(env), tmp_path / "cache"
    assert (index_dir(corpus, BM25_KIND, cache) / "meta.json").is_file()
    assert (index_dir(corpus, DENSE_KIND, cache) / "embeddings.npy").is_file()


def test_index_of_a_missing_path_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert error_line(invoke("index", "nowhere")) == "error: nowhere: no such file or folder"


def write_topics_and_qrels(folder: Path) -> tuple[Path, Path]:
    topics, qrels = folder / "topics.trec", folder / "qrels"
    topics.write_text(
        "".join(f"<top>\n<num>{q}</num><title>{t}</title>\n</top>\n" for q, t in TOPICS.items()),
        encoding="utf-8",
    )
    qrels.write_text("".join(f"{q} 0 {d} 1\n" for q, d in QRELS), encoding="utf-8")
    return topics, qrels


@pytest.mark.slow
def test_eval_json_prints_only_the_runs(env: Path, tmp_path: Path) -> None:
    topics, qrels = write_topics_and_qrels(tmp_path)
    args = ["--corpus", str(env), "--queries", str(topics), "--qrels", str(qrels)]
    report = ok_json(invoke("eval", "--json", *args))
    assert list(report) == ["runs"]
    runs = report["runs"]
    assert {"docs", "vectors"} <= {run["name"] for run in runs}
    assert sum(run["default"] for run in runs) == 1
    for run in runs:
        assert set(run) == {"name", "kind", "default", "metrics"}
        assert run["kind"] in ("platform", "fuser")
        assert list(run["metrics"]) == ["nDCG@10", "AP@100", "RR@10", "R@100"]


def test_eval_with_a_missing_corpus_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_topics_and_qrels(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["--corpus", "missing.trec", "--queries", "topics.trec", "--qrels", "qrels"]
    line = error_line(invoke("eval", "--json", *args))
    assert line == "error: missing.trec: no such file or folder"


def test_a_long_error_message_stays_on_one_line(tmp_path: Path) -> None:
    missing = tmp_path / ("deeply-nested-folder-" * 6) / "corpus.trec"
    assert error_line(invoke("index", str(missing))) == f"error: {missing}: no such file or folder"
