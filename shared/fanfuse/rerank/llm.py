"""The LLM reranker: one listwise call to an OpenAI-compatible chat endpoint.

Listwise, not pointwise: one call sees every candidate and answers with an order, so the cost is
one request per query whatever the pool, and the model compares candidates instead of scoring
each in isolation (RankGPT, Sun et al. 2023). Tokens are bounded on both sides: at most
`max_candidates` results, each a title and a snippet cut to `snippet_chars`, go in; the answer is
ids only, with `max_tokens` set from the number of candidates.

Any failure (no answer, an HTTP error, an answer that is not a ranking) keeps the fused order,
and the note says so: a reranker must never make a search fail or lose results. Ids the model
leaves out keep their fused order after the ones it ranked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from fanfuse.fusion.rerank_contract import RerankOrder
from fanfuse.net.chat import chat_answer, chat_request
from fanfuse.net.runner import RequestSpec, Runner
from fanfuse.settings.rerank import LlmRerankSettings as LlmRerankSettings  # its old home
from fanfuse.wire.errors import ProviderError
from fanfuse.wire.models import RerankNote, Result

SYSTEM_PROMPT = (
    "You rank web search results by how well they answer a search query. "
    'Reply with JSON only, in the form {"ranking": [3, 1, 2]}: the ids of the results, '
    "most relevant first, each id once."
)
TITLE_CHARS = 150
JSON_OBJECT = re.compile(r"\{.*\}|\[.*\]", re.S)


def prompt(query: str, candidates: Sequence[Result], snippet_chars: int) -> str:
    lines = [f"Query: {query}", "", "Results:"]
    for i, result in enumerate(candidates, 1):
        snippet = " ".join(result.snippet.split())[:snippet_chars]
        lines.append(f"[{i}] {result.title[:TITLE_CHARS]}\n{result.url}\n{snippet}")
    lines += ["", f"Rank all {len(candidates)} ids."]
    return "\n".join(lines)


def build_request(
    settings: LlmRerankSettings, query: str, candidates: Sequence[Result]
) -> RequestSpec:
    """The one chat call (pure): output tokens sized for a list of ids and nothing more."""
    return chat_request(
        settings.base_url or "",
        settings.api_key,
        settings.model,
        SYSTEM_PROMPT,
        prompt(query, candidates, settings.snippet_chars),
        max_tokens=16 + 4 * len(candidates),
        temperature=0.0,
    )


def parse_ranking(answer: str, count: int) -> list[int]:
    """0-based positions best first from the model's text, or ValueError.

    Takes `{"ranking": [...]}` or a bare list, inside code fences or prose; drops ids out of
    range and repeats; appends the ids the model left out in their fused order.
    """
    match = JSON_OBJECT.search(answer)
    if match is None:
        raise ValueError(f"no JSON in the answer: {answer[:120]!r}")
    try:
        data = json.loads(match.group(0))
    except ValueError as exc:
        raise ValueError(f"answer is not JSON: {exc}") from None
    ranking = data.get("ranking") if isinstance(data, dict) else data
    if not isinstance(ranking, list):
        raise ValueError("no `ranking` list in the answer")
    order: list[int] = []
    for item in ranking:
        valid = isinstance(item, int) and not isinstance(item, bool) and 1 <= item <= count
        if valid and item - 1 not in order:
            order.append(item - 1)
    if not order:
        raise ValueError("the ranking names none of the candidates")
    return order + [i for i in range(count) if i not in order]


class LlmReranker:
    """Reranks with the configured endpoint through the shared runner (retries, call records)."""

    def __init__(self, settings: LlmRerankSettings, runner: Runner) -> None:
        self.settings, self.runner = settings, runner

    async def order(self, query: str, candidates: Sequence[Result]) -> RerankOrder:
        pool = list(candidates[: self.settings.max_candidates])
        note = RerankNote(method="llm", model=self.settings.model, applied=True)
        if not pool:
            return RerankOrder(order=[], note=note)
        try:
            request = build_request(self.settings, query, pool)
            response = await self.runner.request("reranker", request, self.settings.policy())
            if response.status >= 400:
                raise ProviderError("reranker", f"HTTP {response.status}")
            order = parse_ranking(chat_answer(response.body), len(pool))
        except Exception as exc:  # any failure: the fused order stands, and the note says why
            failed = note.model_copy(
                update={"applied": False, "error": f"fused order kept: {exc}"[:300]}
            )
            return RerankOrder(order=[r.url for r in candidates], note=failed)
        ranked = [pool[i].url for i in order] + [r.url for r in candidates[len(pool) :]]
        return RerankOrder(order=ranked, note=note.model_copy(update={"candidates": len(pool)}))
