"""Retrieval quality of the offline platforms and of every fuser, measured with ir-measures.

This is how the default fuser was chosen and how a change to retrieval or fusion is judged:
all queries of a TREC-format collection (Vaswani by default) go through `docs` (BM25) and
`vectors` (dense), each run is fused by every fuser, and each list is scored against the qrels.
The fused lists go the production way: the hits the platforms would return (`to_hits`) through
`fusion.fuse_with`, deduplication included, mapped back to document ids; so a change to dedup
shows here too. The rows after the fusers (`evaluation_pipelines`) measure what `comprehensive`
could do: fuse deeper lists, fuse with scores, rerank the fused pool, re-query with RM3; each
is compared with RRF query by query, since on 93 queries a difference of 0.01 is often chance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ir_measures
from ir_measures import AP, RR, R, nDCG
from pydantic import BaseModel, Field
from rich import box
from rich.console import Group
from rich.table import Column, Table
from rich.text import Text

from fanfuse.fusion.fusers import DEFAULT_FUSION, FUSERS, VARIANTS
from fanfuse.platforms.contract import SearchParams
from fanfuse.platforms.docs import to_hits
from fanfuse.retrieval import Ranked
from fanfuse.retrieval.bm25 import Bm25Index
from fanfuse.retrieval.bundle import BUNDLE, write_bundle
from fanfuse.retrieval.corpus import (
    Corpus,
    default_corpus_path,
    default_qrels_path,
    default_queries_path,
    load_corpus,
    load_trec_queries,
)
from fanfuse.retrieval.dense import DenseIndex, dense_unavailable_reason
from fanfuse.retrieval.embeddings import MODEL_NAME
from fanfuse.tools.evaluation.pipelines import (
    PRODUCTION_DEPTH,
    Candidates,
    Comparison,
    IdRun,
    Kind,
    Pipeline,
    compare,
    mode_pipelines,
    pipeline_run,
    pipelines,
    requery_hits,
    requery_ranked,
)
from fanfuse.wire.errors import CorpusError
from fanfuse.wire.models import Hit

MEASURES = (nDCG @ 10, AP @ 100, RR @ 10, R @ 100)
METRICS = tuple(str(measure) for measure in MEASURES)  # "nDCG@10", "AP@100", "RR@10", "R@100"

_read_trec_qrels: Any = ir_measures.read_trec_qrels  # untyped upstream


class EvalRun(BaseModel):
    name: str
    kind: Kind
    depth: int | None = Field(default=None, description="each platform's list length fused")
    default: bool = False
    metrics: dict[str, float]
    comparisons: list[Comparison] = Field(
        default_factory=list, description="nDCG@10 against baselines, query by query"
    )


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


def per_query(run: IdRun, query_ids: Sequence[str], qrels: _Qrels) -> dict[str, list[float]]:
    """Each measure's value on each judged query (in `query_ids` order); no results count as 0.

    ir-measures' aggregate would silently drop a query missing from the run (say, a query
    whose every word is a stopword), flattering the run; trec_eval -c counts it as 0.
    """
    scored = [
        ir_measures.ScoredDoc(qid, doc_id, score)
        for qid, results in zip(query_ids, run, strict=True)
        for doc_id, score in results
    ]
    judged = [qid for qid in query_ids if qid in qrels.query_ids]
    values = {name: dict.fromkeys(judged, 0.0) for name in METRICS}
    for metric in ir_measures.iter_calc(MEASURES, qrels.judgements, scored):
        if metric.query_id in qrels.query_ids:
            values[str(metric.measure)][metric.query_id] = float(metric.value)
    return {name: list(by_query.values()) for name, by_query in values.items()}


def _means(values: Mapping[str, list[float]]) -> dict[str, float]:
    return {name: sum(v) / len(v) if v else 0.0 for name, v in values.items()}


def _ids(corpus: Corpus, ranked: Sequence[Ranked]) -> IdRun:
    return [[(corpus.docs[position].id, score) for position, score in rs] for rs in ranked]


class _Rows:
    """The report's rows in order, with each row's per-query values kept for comparisons."""

    def __init__(self, query_ids: Sequence[str], qrels: _Qrels) -> None:
        self.query_ids, self.qrels = query_ids, qrels
        self.runs: list[EvalRun] = []
        self.values: dict[str, dict[str, list[float]]] = {}

    def add(self, name: str, kind: Kind, run: IdRun, depth: int, default: bool = False) -> None:
        values = per_query(run, self.query_ids, self.qrels)
        self.values[name] = values
        self.runs.append(
            EvalRun(name=name, kind=kind, depth=depth, default=default, metrics=_means(values))
        )

    def compare(self, name: str, *baselines: str) -> None:
        """Add each baseline's paired comparison on nDCG@10 to the row `name`."""
        run = next(r for r in self.runs if r.name == name)
        measure = METRICS[0]
        for baseline in dict.fromkeys(b for b in baselines if b != name and b in self.values):
            run.comparisons.append(
                compare(
                    self.values[name][measure], self.values[baseline][measure], baseline, measure
                )
            )


def _rrf_at(depth: int, eval_depth: int) -> str:
    """The row name of plain RRF at `depth` (the default fuser's row at the eval's depth)."""
    return DEFAULT_FUSION.value if depth == eval_depth else f"{DEFAULT_FUSION.value}@{depth}"


def run_evaluation(
    corpus_path: Path | None = None,
    queries_path: Path | None = None,
    qrels_path: Path | None = None,
    depth: int = 100,
    show_progress: bool = True,
    step: Callable[[str], None] | None = None,
) -> EvalReport:
    """Score `docs`, `vectors` (when installed), every fuser, depth and reranker on a collection.

    Each platform retrieves `depth` documents per query; fusers fuse those and keep `depth`.
    Then come the pipelines of `evaluation_pipelines` (shallower depths, the fusers at the
    production depth, the offline rerankers) and RM3 re-querying; each of those rows is
    compared on nDCG@10 with RRF at its own depth and at the production depth. The first run
    encodes the corpus for `vectors` (minutes for Vaswani; a progress bar is shown when
    `show_progress`); later runs load the cached embeddings. `step(message)` is told what runs
    next (loading, each platform's retrieval, each row), so a minute's work is never silent.
    """
    say = step or (lambda message: None)
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    say("loading the corpus, queries and judgements")
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

    say(f"docs: BM25 over {len(corpus)} documents, {len(texts)} queries")
    bm25 = Bm25Index.load_or_build(corpus)
    ranked: dict[str, list[Ranked]] = {"docs": bm25.search(texts, depth)}
    reason = dense_unavailable_reason()
    if reason is None:
        say(f"vectors: loading the model and the embeddings, {len(texts)} queries")

        def encoding(done: int, total: int) -> None:
            say(f"vectors: encoding the corpus, {done}/{total} documents")

        dense = DenseIndex.load_or_build(
            corpus,
            show_progress=show_progress and step is None,
            on_progress=encoding if step is not None else None,
        )
        ranked["vectors"] = dense.search(texts, depth)
    else:
        notes.append(f"vectors not evaluated: {reason}")
    if len(ranked) < 2:
        notes.append("only one platform ran, so every fuser just reproduces its ranking")
    candidates = Candidates(
        texts, _hits(corpus, ranked, texts, depth, False), _hits(corpus, ranked, texts, depth, True)
    )

    rows = _Rows(query_ids, qrels)
    for name, rs in ranked.items():
        rows.add(name, "platform", _ids(corpus, rs), depth)
    names = [m.value for m in FUSERS] + list(VARIANTS)
    later: list[tuple[Pipeline, Kind]] = [
        *((Pipeline(name, depth, name), "fuser") for name in names),
        *pipelines(depth),
        *((p, "mode") for p in mode_pipelines() if p.depth <= depth),
    ]
    for i, (pipeline, kind) in enumerate(later, start=1):
        say(f"row {i}/{len(later)}: {pipeline.name}")
        run = pipeline_run(pipeline, candidates)
        default = kind == "fuser" and pipeline.name == DEFAULT_FUSION.value
        rows.add(pipeline.name, kind, run, pipeline.depth, default=default)
    say("docs+rm3: re-querying BM25 with expanded queries")
    _requery(rows, bm25, corpus, ranked, candidates, depth)

    for row in rows.runs:
        if row.kind == "platform" or row.depth is None or row.comparisons:
            continue
        rows.compare(row.name, _rrf_at(row.depth, depth), _rrf_at(PRODUCTION_DEPTH, depth))
    return EvalReport(
        corpus=corpus.name,
        documents=len(corpus),
        queries=len(query_ids) - len(unjudged),
        depth=depth,
        runs=rows.runs,
        notes=notes,
    )


def _hits(
    corpus: Corpus, ranked: Mapping[str, list[Ranked]], texts: list[str], depth: int, content: bool
) -> dict[str, list[list[Hit]]]:
    params = SearchParams(queries=texts, limit=depth, include_content=content)
    return {name: to_hits(corpus, rs, params) for name, rs in ranked.items()}


def _requery(
    rows: _Rows,
    bm25: Bm25Index,
    corpus: Corpus,
    ranked: Mapping[str, list[Ranked]],
    candidates: Candidates,
    depth: int,
) -> None:
    """RM3 re-querying rows: a second `docs` round, fused again with the other platforms.

    Feedback from `docs`' own top documents (classic RM3, weighted by BM25 score), and from the
    top of the RRF list fused at the row's depth (weighted by fused score): the latter is what
    the aggregator could ask for, since it alone sees the fused list.
    """
    texts = candidates.queries
    for d in sorted({min(PRODUCTION_DEPTH, depth), depth}):
        fused = candidates.pools(d, DEFAULT_FUSION.value)
        from_fused = [
            [(corpus.position(str(r.metadata["doc_id"])), r.score) for r in pool] for pool in fused
        ]
        for label, feedback in (("docs+rm3", ranked["docs"]), ("docs+rm3(fused)", from_fused)):
            second = requery_ranked(bm25, texts, feedback, depth)
            if d == depth:  # the second round alone, against the first
                rows.add(label, "requery", _ids(corpus, second), depth)
                rows.compare(label, "docs")
            hits = {**candidates.hits, "docs": requery_hits(corpus, second, texts, depth)}
            name = f"{DEFAULT_FUSION.value}@{d}({label})"
            rows.add(name, "requery", pipeline_run(Pipeline(name, d), Candidates(texts, hits)), d)


NARROW: dict[str, Any] = {"box": box.SIMPLE_HEAD, "padding": 0, "show_edge": False}
"""One space between columns and a rule under the heads: the longest row name (28 characters)
and the four metrics fit 80 columns."""


def render_report(report: EvalReport) -> Group:
    """Two tables that each fit 80 columns. The first: a row per run, its kind, depth and the
    four metrics, the best value of each in bold, the default fuser's row in green. The second:
    each comparison of a row's nDCG@10 with RRF at its own depth and at the production depth
    (or, for a re-queried `docs`, with `docs`): mean difference, queries won and lost, and the
    p-value of a paired randomization test."""
    title = (
        f"{report.corpus}: {report.documents} docs, {report.queries} queries, top {report.depth}"
    )
    table = Table(
        Column("run", no_wrap=True),
        Column("kind", no_wrap=True),
        *(Column(h, justify="right", no_wrap=True) for h in ("depth", *METRICS)),
        title=title,
        caption="\n".join(report.notes) or None,
        **NARROW,
    )
    best = {m: max((r.metrics[m] for r in report.runs), default=0.0) for m in METRICS}
    for run in report.runs:
        cells = [
            Text(f"{run.metrics[m]:.4f}", style="bold" if run.metrics[m] == best[m] else "")
            for m in METRICS
        ]
        table.add_row(
            f"{run.name} (default)" if run.default else run.name,
            run.kind,
            str(run.depth or ""),
            *cells,
            style="green" if run.default else None,
        )
    compared = Table(
        Column("run", no_wrap=True),
        Column("against", no_wrap=True),
        *(Column(h, justify="right", no_wrap=True) for h in ("ΔnDCG@10", "won/lost", "p")),
        title="nDCG@10 against RRF (paired randomization test)",
        **NARROW,
    )
    for run in report.runs:
        for c in run.comparisons:
            compared.add_row(
                run.name, c.baseline, f"{c.delta:+.4f}", f"{c.wins}/{c.losses}", f"{c.p_value:.3f}"
            )
    return Group(table, Text(""), compared)


def build_indexes(
    path: Path | None,
    dense: bool,
    bundle: bool = False,
    step: Callable[[str], None] | None = None,
) -> int:
    """Build and cache the indexes of a corpus ahead of time (`fanfuse index PATH`).

    With `dense`, also encodes the corpus with a progress bar, unless the package's bundled
    embeddings were made from this corpus and the installed model (then they are used as they
    are); raises RuntimeError when the `vectors` extra is not installed, saying what to install.
    With `bundle`, the bundled corpus is encoded anew and its bundle written (maintainers).
    Returns the number of documents. `step(message)`: told each phase, and the encoding's
    progress instead of the bar.
    """
    say = step or (lambda message: None)

    def encoding(done: int, total: int) -> None:
        say(f"encoding documents with {MODEL_NAME}: {done}/{total}")

    on_progress = encoding if step is not None else None
    corpus = load_corpus(path)
    say(f"building the BM25 index of {len(corpus)} documents")
    Bm25Index.load_or_build(corpus)
    if dense or bundle:
        reason = dense_unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"cannot build the dense index: {reason}")
    if bundle:
        if corpus.source != default_corpus_path().resolve():
            raise ValueError("--bundle writes the bundled corpus's embeddings: give no PATH")
        embeddings = DenseIndex.build(corpus, step is None, on_progress)
        write_bundle(BUNDLE, corpus, embeddings)
    if dense:
        say("loading (or encoding) the dense index")
        DenseIndex.load_or_build(corpus, show_progress=step is None, on_progress=on_progress)
    return len(corpus)
