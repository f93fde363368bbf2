"""Retrieval quality of the offline platforms and of every fuser, measured with ir-measures.

This is how the default fuser was chosen and how a change to retrieval or fusion is judged:
all queries of a TREC-format collection (Vaswani by default) go through `docs` (BM25) and
`vectors` (dense), each run is fused by every fuser, and each list is scored against the qrels.
The fused lists go the production way: the hits the platforms would return (`to_hits`) through
`fusion.fuse_with`, deduplication included, mapped back to document ids; so a change to dedup
shows here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import ir_measures
from ir_measures import AP, RR, R, nDCG
from pydantic import BaseModel
from rich.table import Table

from fanfuse import fusion
from fanfuse.corpus import (
    Corpus,
    default_qrels_path,
    default_queries_path,
    load_corpus,
    load_trec_queries,
)
from fanfuse.errors import CorpusError
from fanfuse.fusers import DEFAULT_FUSION, FUSERS, VARIANTS, Fuser
from fanfuse.models import Hit
from fanfuse.platforms.base import SearchParams
from fanfuse.platforms.docs import to_hits
from fanfuse.retrieval import Ranked
from fanfuse.retrieval.bm25 import Bm25Index
from fanfuse.retrieval.dense import DenseIndex, dense_unavailable_reason

MEASURES = (nDCG @ 10, AP @ 100, RR @ 10, R @ 100)
METRICS = tuple(str(measure) for measure in MEASURES)  # "nDCG@10", "AP@100", "RR@10", "R@100"

_read_trec_qrels: Any = ir_measures.read_trec_qrels  # untyped upstream

# Per query: (doc id, score) best first.
IdRun = list[list[tuple[str, float]]]


class EvalRun(BaseModel):
    name: str
    kind: Literal["platform", "fuser"]
    default: bool = False
    metrics: dict[str, float]


class EvalReport(BaseModel):
    corpus: str
    documents: int
    queries: int
    depth: int
    runs: list[EvalRun]
    notes: list[str] = []


class _Qrels:
    """Judgements plus the ids of the queries that have any (only those can be scored)."""

    def __init__(self, path: Path) -> None:
        try:
            self.judgements = list(_read_trec_qrels(str(path)))
        except (OSError, ValueError, IndexError) as exc:
            raise CorpusError(f"{path}: not a TREC qrels file ({exc})") from exc
        if not self.judgements:
            raise CorpusError(f"{path}: no relevance judgements")
        self.query_ids = {qrel.query_id for qrel in self.judgements}


def _score(run: IdRun, query_ids: Sequence[str], qrels: _Qrels) -> dict[str, float]:
    """Mean of each measure over the judged queries; a query with no results counts as 0.

    ir-measures' aggregate would silently drop a query missing from the run (say, a query
    whose every word is a stopword), flattering the run; trec_eval -c counts it as 0.
    """
    scored = [
        ir_measures.ScoredDoc(qid, doc_id, score)
        for qid, results in zip(query_ids, run, strict=True)
        for doc_id, score in results
    ]
    judged = [qid for qid in query_ids if qid in qrels.query_ids]
    totals = dict.fromkeys(METRICS, 0.0)
    for metric in ir_measures.iter_calc(MEASURES, qrels.judgements, scored):
        if metric.query_id in qrels.query_ids:
            totals[str(metric.measure)] += float(metric.value)
    return {name: totals[name] / len(judged) if judged else 0.0 for name in METRICS}


def _ids(corpus: Corpus, ranked: list[Ranked]) -> IdRun:
    return [[(corpus.docs[position].id, score) for position, score in rs] for rs in ranked]


def _fuse(fuser: Fuser, hits: Mapping[str, list[list[Hit]]], depth: int, queries: int) -> IdRun:
    """Each query's platform hits fused as production fuses them, as (doc id, fused score)."""
    fused: IdRun = []
    for i in range(queries):
        results = fusion.fuse_with({name: lists[i] for name, lists in hits.items()}, fuser, depth)
        fused.append([(str(r.metadata["doc_id"]), r.score) for r in results])
    return fused


def run_evaluation(
    corpus_path: Path | None = None,
    queries_path: Path | None = None,
    qrels_path: Path | None = None,
    depth: int = 100,
    show_progress: bool = True,
) -> EvalReport:
    """Score `docs`, `vectors` (when installed) and every fuser on a TREC-format collection.

    Each platform retrieves `depth` documents per query; fusers fuse those and keep `depth`.
    The first run encodes the corpus for `vectors` (minutes for Vaswani; a progress bar is
    shown when `show_progress`); later runs load the cached embeddings.
    """
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    corpus = load_corpus(corpus_path)
    queries_file = queries_path or default_queries_path()
    qrels_file = qrels_path or default_qrels_path()
    queries = load_trec_queries(queries_file)
    qrels = _Qrels(qrels_file)
    unknown = sorted(qrels.query_ids - queries.keys())
    if unknown:
        shown = ", ".join(unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        raise CorpusError(
            f"{qrels_file}: judgements for {len(unknown)} queries that are not in "
            f"{queries_file}: {shown} (a qrels file for other topics?)"
        )
    query_ids = list(queries)
    texts = [queries[qid] for qid in query_ids]
    notes: list[str] = []
    unjudged = [qid for qid in query_ids if qid not in qrels.query_ids]
    if unjudged:
        notes.append(f"{len(unjudged)} queries have no judgements and are not scored")

    ranked: dict[str, list[Ranked]] = {"docs": Bm25Index.load_or_build(corpus).search(texts, depth)}
    reason = dense_unavailable_reason()
    if reason is None:
        dense = DenseIndex.load_or_build(corpus, show_progress=show_progress)
        ranked["vectors"] = dense.search(texts, depth)
    else:
        notes.append(f"vectors not evaluated: {reason}")
    if len(ranked) < 2:
        notes.append("only one platform ran, so every fuser just reproduces its ranking")
    platform_runs = {name: _ids(corpus, rs) for name, rs in ranked.items()}
    params = SearchParams(queries=texts, limit=depth)
    platform_hits = {name: to_hits(corpus, rs, params) for name, rs in ranked.items()}

    runs = [
        EvalRun(name=name, kind="platform", metrics=_score(run, query_ids, qrels))
        for name, run in platform_runs.items()
    ]
    fusers: list[tuple[str, Fuser, bool]] = [
        (method.value, fuser, method == DEFAULT_FUSION) for method, fuser in FUSERS.items()
    ]
    fusers += [(name, fuser, False) for name, fuser in VARIANTS.items()]
    for name, fuser, default in fusers:
        fused = _fuse(fuser, platform_hits, depth, len(query_ids))
        metrics = _score(fused, query_ids, qrels)
        runs.append(EvalRun(name=name, kind="fuser", default=default, metrics=metrics))
    return EvalReport(
        corpus=corpus.name,
        documents=len(corpus),
        queries=len(query_ids) - len(unjudged),
        depth=depth,
        runs=runs,
        notes=notes,
    )


def render_report(report: EvalReport) -> Table:
    """A table with one row per run; the best value of each metric is bold."""
    table = Table(
        title=(
            f"{report.corpus}: {report.documents} docs, {report.queries} queries, "
            f"top {report.depth}"
        ),
        caption="\n".join(report.notes) or None,
    )
    table.add_column("run")
    table.add_column("kind")
    for metric in METRICS:
        table.add_column(metric, justify="right")
    best = {m: max((r.metrics[m] for r in report.runs), default=0.0) for m in METRICS}
    for run in report.runs:
        name = f"{run.name} (default)" if run.default else run.name
        cells = [
            f"[bold]{run.metrics[m]:.4f}[/bold]"
            if run.metrics[m] == best[m]
            else f"{run.metrics[m]:.4f}"
            for m in METRICS
        ]
        table.add_row(name, run.kind, *cells, style="green" if run.default else None)
    return table


def build_indexes(path: Path | None, dense: bool) -> None:
    """Build and cache the indexes of a corpus ahead of time (`fanfuse index PATH`).

    With `dense`, also encodes the corpus with a progress bar; raises RuntimeError when the
    `vectors` extra is not installed, saying what to install.
    """
    corpus = load_corpus(path)
    Bm25Index.load_or_build(corpus)
    if dense:
        reason = dense_unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"cannot build the dense index: {reason}")
        DenseIndex.load_or_build(corpus, show_progress=True)
