"""The compressing stage: every hit's content within the token budget (see content.compress).

Pages are compressed one after another: an LLM endpoint is the slow, metered part, and its
calls are limited by the runner anyway.
"""

from __future__ import annotations

from fanfuse.content.compress import compress_text, estimate_tokens
from fanfuse.stages.stage_run import StageRun
from fanfuse.wire.models import Hit, Stage


async def compress(run: StageRun, hits: list[Hit]) -> list[Hit]:
    budget = run.content.token_budget
    with_content = [i for i, h in enumerate(hits) if h.content]
    over = [i for i in with_content if estimate_tokens(hits[i].content or "") > budget]
    total = len(over)
    run.reporter.enter(Stage.COMPRESSING, f"0/{total} pages over {budget} tokens", total)
    out = list(hits)
    by_llm = truncated = 0
    for done, index in enumerate(over, 1):
        hit = hits[index]
        text, facts = await compress_text(run.runner, run.content, hit.content or "", run.calls)
        by_llm += facts.get("compressed") == "llm"
        truncated += bool(facts.get("truncated"))
        out[index] = hit.model_copy(update={"content": text, "metadata": {**hit.metadata, **facts}})
        run.reporter.step(done, total, f"{done}/{total} pages over {budget} tokens")
    run.reporter.step(
        total,
        total,
        f"{len(with_content)} pages within {budget} tokens "
        f"({by_llm} compressed by LLM, {truncated} truncated)",
    )
    return out
