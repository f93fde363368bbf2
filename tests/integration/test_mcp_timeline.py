"""`get_search_status` carries the search's timeline (issue 32, item 4): in its structured result
(the Digest's `timeline`) and in the text a model reads, a line per platform (queued, started,
first result, each stage, finished) and the search's fan-in and finalization; bounded in size
for 15 platforms x 5 queries. Through the MCP SDK's own client over stdio, against `fanfuse
mcp` on the embedded runtime, as tests/integration/test_mcp.py runs it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fanfuse.fronts.mcp.digest import digest, markdown, timeline_markdown
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.models import SearchRequest, TaskStatus, TaskView
from fanfuse.wire.timeline import RunTimeline, Timeline
from tests.integration.test_mcp import client, reached
from tests.integration.test_mcp import env as env
from tests.integration.test_mcp import stub as stub
from tests.support.fakes import make_task
from tests.support.mcp_harness import structured, text

HEADER = "Timeline (seconds after the search started):"
SLOW_S = 0.6
"""test_mcp.py's `slow` platform answers after this long."""


def timeline_lines(markdown_text: str) -> dict[str, str]:
    """`name -> its line` of the text's timeline block (`search` for the search's own)."""
    block = markdown_text.split(HEADER, 1)[1]
    lines = [line for line in block.strip().splitlines() if line.startswith("- ")]
    return {line[2:].split(":", 1)[0]: line.split(": ", 1)[1] for line in lines}


async def test_a_finished_searchs_status_carries_its_timeline_in_both_forms(
    env: dict[str, str],
) -> None:
    async with client(env) as c:
        found = await c.call_tool("search", {"query": "laser", "platform": "docs, slow"})
        task_id = structured(found)["task_id"]
        status = await c.call_tool("get_search_status", {"task_id": task_id})
    assert HEADER not in text(found)  # the search's own answer stays the results
    data, md = structured(status), text(status)
    assert data["status"] == "completed"
    kept = data["timeline"]
    runs = {r["platform"]: r for r in kept["runs"]}
    assert set(runs) == {"docs", "slow"}
    slow = runs["slow"]
    assert slow["queued"] <= slow["started"] <= slow["working"] <= slow["first_result"]
    assert slow["first_result"] <= slow["finished"] <= kept["fan_in"] <= kept["finalized"]
    assert slow["stages"]["searching"] >= SLOW_S  # the stub's delay
    assert kept["finalized_by"] in ("fan_in", "aggregate")

    # The text: the results and status line as before, then the timeline, a line a platform.
    before, _, _ = md.partition(HEADER)
    assert before.rstrip().endswith(f"(task_id {task_id})")
    lines = timeline_lines(md)
    assert set(lines) == {"docs", "slow", "search"}
    assert lines["slow"].startswith("succeeded, queued ")
    for moment in ("queued", "started", "first result", "finished"):
        assert f"{moment} {slow[moment.replace(' ', '_')]:.3f}" in lines["slow"], moment
    assert f"searching {slow['stages']['searching']:.3f}s" in lines["slow"]
    assert f"fan-in {kept['fan_in']:.3f}" in lines["search"]
    assert f"finalized {kept['finalized']:.3f} by {kept['finalized_by']}" in lines["search"]


async def test_a_running_searchs_status_shows_the_platform_still_working(
    env: dict[str, str], stub: StubSearxServer
) -> None:
    async with client(env) as c:
        started = await c.call_tool("start_search", {"query": "laser", "platform": "docs, held"})
        task_id = structured(started)["task_id"]
        await reached(stub, "held")
        running = await c.call_tool("get_search_status", {"task_id": task_id})
        await c.call_tool("cancel_search", {"task_id": task_id})
    data, md = structured(running), text(running)
    assert data["status"] == "running"
    held = next(r for r in data["timeline"]["runs"] if r["platform"] == "held")
    assert held["started"] is not None and held["finished"] is None
    assert data["timeline"]["finalized"] is None
    assert md.startswith(f"Search {task_id} is running: ")
    lines = timeline_lines(md)
    assert lines["held"].startswith("running, ") and "finished" not in lines["held"]
    assert f"started {held['started']:.3f}" in lines["held"]


def test_the_status_of_15_platforms_and_5_queries_stays_small() -> None:
    """Every field set, four stages, a retried attempt, on 15 platforms with 5 queries: the
    structured timeline and its text stay a few KB (a line a platform, a fixed set of fields)."""
    names = [f"platform_with_a_long_name_{i:02d}" for i in range(15)]
    task, runs = make_task("t15", names)
    request = SearchRequest.model_validate(
        {"query": [f"query number {i}" for i in range(5)], "platform": names}
    )
    stages = {s: 12.3456 for s in ("searching", "resolving", "fetching", "compressing")}
    entries = [
        RunTimeline(
            platform=name,
            state="succeeded",
            attempt=3,
            queued=100.123 + i,
            started=101.234 + i,
            working=102.345 + i,
            first_result=103.456 + i,
            stages=stages,
            finished=150.567 + i,
            calls=1234,
        )
        for i, name in enumerate(names)
    ]
    kept = Timeline(runs=entries, fan_in=165.0, finalized=165.5, finalized_by="aggregate")
    fields: dict[str, Any] = {
        **task.model_dump(),
        "request": request,
        "queries": request.queries,
        "status": TaskStatus.COMPLETED,
        "timeline": kept,
        "finalized_at": task.created_at + timedelta(seconds=165.5),
    }
    view = TaskView(**fields, platform_runs=runs)
    d = digest(view)
    assert d.timeline == kept
    structured_size = len(d.timeline.model_dump_json())
    text_size = len(timeline_markdown(d.timeline))
    assert structured_size < 6_500, structured_size
    assert text_size < 4_000, text_size  # about 250 characters a platform
    assert markdown(d, with_timeline=True).endswith(timeline_markdown(kept))
    assert len(timeline_lines(markdown(d, with_timeline=True))) == 16
