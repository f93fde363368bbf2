"""Which reranker a `comprehensive` search gets: the LLM when an endpoint is configured, else
the offline default (`offline.DEFAULT_OFFLINE`), which is the fused order as long as no offline
reranker beats fusion on Vaswani (docs/modes.md has the figures)."""

from __future__ import annotations

from collections.abc import Sequence

from fanfuse.fusion.rerank_contract import FusedOrder, PoolReranker, Reranker, RerankOrder
from fanfuse.net.runner import Runner, default_runner
from fanfuse.rerank.llm import LlmReranker
from fanfuse.rerank.offline import DEFAULT_OFFLINE
from fanfuse.settings.rerank import LlmRerankSettings
from fanfuse.wire.models import RerankNote, Result

NO_RERANKER = (
    "no LLM endpoint is configured (FANFUSE_RERANK_LLM_BASE_URL), and no offline reranker "
    "beat the fused order on Vaswani (docs/modes.md)"
)


class Offline:
    """A pure `Reranker` as the aggregator calls it; the fused order is reported as not
    reranked, with the reason."""

    def __init__(self, reranker: Reranker) -> None:
        self.reranker = reranker

    async def order(self, query: str, candidates: Sequence[Result]) -> RerankOrder:
        reranked = self.reranker.rerank(query, candidates, len(candidates))
        if reranked.method == FusedOrder.method:
            note = RerankNote(method="none", applied=False, error=NO_RERANKER)
        else:
            note = RerankNote(
                method=f"offline:{reranked.method}", applied=True, candidates=len(candidates)
            )
        return RerankOrder(order=[r.url for r in reranked.results], note=note)


def reranker_for(llm: LlmRerankSettings, runner: Runner | None = None) -> PoolReranker:
    """`llm`: the settings the composition root read (the endpoint turns the LLM on)."""
    if llm.configured:
        return LlmReranker(llm, runner or default_runner())
    return Offline(DEFAULT_OFFLINE)
