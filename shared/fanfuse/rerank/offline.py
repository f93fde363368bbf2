"""Offline rerankers: pseudo-relevance feedback over the candidate pool, with no I/O.

`comprehensive` reranks the fused candidates; with no LLM endpoint configured, the aggregator
has only the candidates themselves (title, snippet, content when fetched, fused score), so the
offline reranker is RM3 (Lavrenko and Croft's relevance model, interpolated with the query as
in Abdul-Jaleel et al., TREC 2004) computed over that pool:

1. every candidate's text (title unless the text already starts with it, then content when
   fetched, else snippet) is analyzed as the `docs` index analyzes (stopwords, Snowball);
2. the top `fb_docs` fused candidates, weighted by their fused score, give the relevance model
   P(w|R) = sum_D w(D) tf(w, D) / |D|; its `fb_terms` best terms, normalized, are mixed with the
   query's own term distribution: q'(w) = orig_weight q(w) + (1 - orig_weight) P(w|R);
3. every candidate is scored against q' with BM25 whose statistics (document frequency, mean
   length) are those of the pool: a web result has no corpus around it;
4. that score is combined with the fused order: `rrf` (RRF, k = 60, of the fused order and the
   PRF order), `vote` (RRF of every platform's ranks and the PRF order: PRF as one more
   platform), `replace` (the PRF order alone) or `linear` (CombSUM of min-max normalized fused
   and PRF scores).

fb_docs = 10, fb_terms = 10, orig_weight = 0.5 and RRF's k = 60 are the literature's defaults
(Anserini's RM3, Cormack et al. 2009), not tuned on Vaswani; BM25's k1 and b are the `docs`
index's. What each variant scored on Vaswani, and which one `comprehensive` uses, is in
`DEFAULT_OFFLINE`'s docstring and `fanfuse eval`.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from fanfuse.fusion import fusers
from fanfuse.fusion.rerank_contract import FusedOrder, Reranked, Reranker, reordered
from fanfuse.wire.models import Result

Combine = Literal["rrf", "vote", "replace", "linear"]
FB_DOCS = 10
FB_TERMS = 10
ORIG_WEIGHT = 0.5


@functools.cache
def _analyzer() -> Callable[[str], list[str]]:
    """The `docs` index's analyzer, imported on first use (bm25s is slow to import)."""
    from fanfuse.retrieval.bm25 import Analyzer

    return Analyzer()


@functools.cache
def _bm25_params() -> tuple[float, float]:
    from fanfuse.retrieval import bm25

    return bm25.K1, bm25.B


def candidate_text(result: Result) -> str:
    """What a candidate is judged by: its content if fetched, else its snippet, after its title.

    The title is left out when the text already starts with it (the offline corpora derive
    titles from the text's first words), so that it is not counted twice.
    """
    body = result.content or result.snippet
    title = " ".join(result.title.rstrip("…").split())
    if not title or " ".join(body.split()).lower().startswith(title.lower()):
        return body
    return f"{title}\n{body}"


def relevance_model(
    feedback: Sequence[Sequence[str]], weights: Sequence[float], terms: int
) -> dict[str, float]:
    """RM1: P(w|R) = sum_D w(D) tf(w, D) / |D| over the feedback documents, its `terms` best.

    Weights are normalized to sum 1 (all zero: uniform); the kept terms are renormalized to sum
    1; ties go to the alphabetically first term, so the model is deterministic.
    """
    total = sum(weights)
    shares = [w / total for w in weights] if total > 0 else [1.0 / len(weights)] * len(weights)
    model: dict[str, float] = {}
    for tokens, share in zip(feedback, shares, strict=True):
        for term, count in Counter(tokens).items():
            model[term] = model.get(term, 0.0) + share * count / len(tokens)
    best = sorted(model.items(), key=lambda item: (-item[1], item[0]))[:terms]
    mass = sum(value for _, value in best)
    return {term: value / mass for term, value in best} if mass > 0 else {}


def rm3_query(
    query: Sequence[str],
    feedback: Sequence[Sequence[str]],
    weights: Sequence[float],
    fb_terms: int = FB_TERMS,
    orig_weight: float = ORIG_WEIGHT,
) -> dict[str, float]:
    """RM3: the query's term distribution mixed with RM1 of the feedback documents.

    With no feedback text, the query alone; with no query term, the relevance model alone.
    """
    original = {t: c / len(query) for t, c in Counter(query).items()} if query else {}
    model = relevance_model(feedback, weights, fb_terms) if feedback else {}
    if not original or not model:
        return original or model
    return {
        term: orig_weight * original.get(term, 0.0) + (1 - orig_weight) * model.get(term, 0.0)
        for term in sorted(original.keys() | model.keys())
    }


def pool_bm25(query: Mapping[str, float], docs: Sequence[Sequence[str]]) -> list[float]:
    """BM25 of each document for a weighted query, with df and mean length from `docs` only.

    Lucene's idf, log(1 + (n - df + 0.5) / (df + 0.5)), stays positive, so a term every
    candidate has adds (almost) nothing instead of a penalty.
    """
    if not docs:
        return []
    k1, b = _bm25_params()
    counts = [Counter(doc) for doc in docs]
    mean_length = sum(len(doc) for doc in docs) / len(docs) or 1.0
    scores = [0.0] * len(docs)
    for term, weight in query.items():
        df = sum(1 for c in counts if term in c)
        if not df or not weight:
            continue
        idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
        for i, c in enumerate(counts):
            tf = c.get(term, 0)
            if tf:
                norm = k1 * (1 - b + b * len(docs[i]) / mean_length)
                scores[i] += weight * idf * tf * (k1 + 1) / (tf + norm)
    return scores


def combined(candidates: Sequence[Result], prf: Sequence[float], how: Combine) -> list[float]:
    """Per candidate (fused order), the score that orders it: see the module docstring.

    The PRF run holds only candidates with a positive PRF score (one that shares no expanded
    term is absent from it, as from a platform's list).
    """
    if how == "replace":
        return list(prf)
    keys = [f"{i:06d}" for i in range(len(candidates))]
    prf_order = sorted((i for i, s in enumerate(prf) if s > 0), key=lambda i: (-prf[i], i))
    runs: dict[str, fusers.Run] = {}
    if how == "vote":
        for platform in dict.fromkeys(p for c in candidates for p in c.ranks):
            listed = [i for i, c in enumerate(candidates) if platform in c.ranks]
            listed.sort(key=lambda i: (candidates[i].ranks[platform], i))
            runs[f"platform:{platform}"] = [(keys[i], None) for i in listed]
    else:
        runs["fused"] = [(key, c.score) for key, c in zip(keys, candidates, strict=True)]
    runs["prf"] = [(keys[i], prf[i]) for i in prf_order]
    scored = fusers.score_fusion(runs) if how == "linear" else fusers.rrf(runs)
    by_key = dict(scored)
    return [by_key.get(key, 0.0) for key in keys]


@dataclass(frozen=True)
class PoolRm3:
    """RM3 over the candidate pool, combined with the fused order (module docstring).

    `expand=False` scores the pool with the query alone (BM25 over the pool, no feedback): the
    control that says what the feedback itself adds.
    """

    method: str = "pool_rm3"
    combine: Combine = "rrf"
    expand: bool = True
    fb_docs: int = FB_DOCS
    fb_terms: int = FB_TERMS
    orig_weight: float = ORIG_WEIGHT

    def rerank(self, query: str, candidates: Sequence[Result], limit: int) -> Reranked:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        analyze = _analyzer()
        terms = analyze(query)
        docs = [analyze(candidate_text(c)) for c in candidates] if terms else []
        top = zip(docs[: self.fb_docs], candidates[: self.fb_docs], strict=False)
        feedback = [(doc, c.score) for doc, c in top if doc]
        if self.expand:
            expanded = rm3_query(
                terms,
                [doc for doc, _ in feedback],
                [max(score, 0.0) for _, score in feedback],
                self.fb_terms,
                self.orig_weight,
            )
        else:
            expanded = rm3_query(terms, [], [])
        prf = pool_bm25(expanded, docs)
        if not any(score > 0 for score in prf):
            # No query word to match (stopwords only), or no candidate has one: no evidence.
            kept = FusedOrder().rerank(query, candidates, limit).results
            return Reranked(kept, self.method, "no candidate matches the query: fused order kept")
        results = reordered(candidates, combined(candidates, prf, self.combine), limit)
        added = [t for t in expanded if t not in terms]
        note = (
            f"{'RM3' if self.expand else 'BM25'} over {len(candidates)} candidates"
            + (f" ({len(feedback)} feedback; added: {', '.join(added)})" if self.expand else "")
            + f", combined with the fused order by {self.combine}"
        )
        return Reranked(results, self.method, note)


VARIANTS: dict[str, Reranker] = {
    "pool_rm3": PoolRm3(),
    "pool_rm3_vote": PoolRm3(method="pool_rm3_vote", combine="vote"),
    "pool_rm3_replace": PoolRm3(method="pool_rm3_replace", combine="replace"),
    "pool_rm3_linear": PoolRm3(method="pool_rm3_linear", combine="linear"),
    "pool_bm25": PoolRm3(method="pool_bm25", expand=False),
}
"""The offline rerankers `fanfuse eval` reports, by method name."""

DEFAULT_OFFLINE: Reranker = FusedOrder()
"""What `comprehensive` uses without an LLM endpoint: the fused order, because no offline
reranker beat RRF on Vaswani (`fanfuse eval`, 93 queries, nDCG@10, paired randomization test).

Over the RRF pool of each platform's top 100 (RRF alone: 0.4894), `pool_rm3` scored 0.4615
(-0.028, 29 queries won / 51 lost, p = 0.006), `pool_rm3_vote` 0.4830 (-0.006, p = 0.38),
`pool_rm3_linear` 0.4704, `pool_bm25` 0.4440 and `pool_rm3_replace` 0.4309; with the
documents' full text instead of 300-character snippets, none did better than -0.004. Over the
top 10, all were within noise of RRF (-0.024 to +0.001). Adding RRF's lexical evidence again
tilts a fusion of equally good lexical and dense lists towards the lexical one; what did help
`comprehensive` was depth alone (RRF over the top 50: +0.024 over the top 10, p = 0.044).
"""
