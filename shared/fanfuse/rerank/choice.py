"""Which reranker a `comprehensive` search gets: the LLM when an endpoint is configured, else
the offline reranker, else (none beats the fused order) the fused order with a note saying so."""

from __future__ import annotations

from collections.abc import Sequence

from fanfuse.models import RerankNote, Result
from fanfuse.net.runner import Runner, default_runner
from fanfuse.rerank.base import Reranked, Reranker
from fanfuse.rerank.llm import LlmReranker, LlmRerankSettings
from fanfuse.settings import Settings


class KeepFused:
    """The fused order, kept on purpose; the note says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def rerank(self, query: str, candidates: Sequence[Result]) -> Reranked:
        note = RerankNote(method="none", applied=False, error=self.reason)
        return Reranked(order=[r.url for r in candidates], note=note)


NO_RERANKER = (
    "no LLM endpoint is configured (FANFUSE_RERANK_LLM_BASE_URL), and no offline reranker "
    "beat the fused order on Vaswani (docs/modes.md)"
)


def reranker_for(settings: Settings, runner: Runner | None = None) -> Reranker:
    llm = LlmRerankSettings()
    if llm.configured:
        return LlmReranker(llm, runner or default_runner())
    return KeepFused(NO_RERANKER)
