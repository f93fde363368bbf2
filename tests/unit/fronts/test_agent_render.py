"""The MCP tools' markdown: sections per query, the status line, the rerank note, content cut."""

from __future__ import annotations

from datetime import timedelta

from fanfuse.fronts.mcp.digest import CONTENT_CHARS, digest, markdown
from fanfuse.fusion.rerank_contract import RerankOrder
from fanfuse.rules import aggregate
from fanfuse.wire.models import (
    PlatformRun,
    PlatformState,
    RerankNote,
    SearchRequest,
    Task,
    TaskView,
    utcnow,
)
from tests.support.fakes import hits


def final_view(mode: str, plan: RerankOrder | None) -> TaskView:
    now = utcnow()
    request = SearchRequest.model_validate(
        {"query": "q", "platform": ["a"], "mode": mode, "max_results": 2}
    )
    task = Task(
        task_id="t1",
        request=request,
        queries=["q"],
        platforms=["a"],
        fusion="rrf",
        deadline_at=now + timedelta(seconds=30),
        expires_at=now + timedelta(minutes=5),
    )
    found = [
        h.model_copy(update={"rank": i, "content": "word " * 2000})
        for i, h in enumerate(hits("a", 3), 1)
    ]
    run = PlatformRun(
        task_id="t1", name="a", index=1, of=1, state=PlatformState.SUCCEEDED, results=found
    )
    final = aggregate.final_document(task, [run], now, {0: plan} if plan else None).task
    return TaskView.model_validate({**dict(final), "platform_runs": [run]})


def test_a_reranked_search_says_so_and_page_content_is_cut() -> None:
    order = [f"https://example.com/a/{i}" for i in (3, 2, 1)]
    note = RerankNote(method="llm", model="m", applied=True, candidates=3)
    text = markdown(digest(final_view("comprehensive", RerankOrder(order, note))))
    assert text.startswith('## Query 1: "q"\n\n1. **a 3**')
    assert "Reranked by llm (m): 3 candidates (task_id t1)" in text
    content_lines = [line for line in text.splitlines() if "content: " in line]
    assert content_lines and all(len(line) <= CONTENT_CHARS + 20 for line in content_lines)


def test_a_kept_fused_order_is_on_the_status_line_with_its_reason() -> None:
    note = RerankNote(method="none", applied=False, error="no LLM endpoint")
    d = digest(final_view("comprehensive", RerankOrder([], note)))
    assert d.rerank == "not reranked (none): no LLM endpoint"
    assert "Not reranked (none): no LLM endpoint" in markdown(d)
