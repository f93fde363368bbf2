"""`fanfuse mcp` on the embedded runtime, through the SDK's own client, over stdio and HTTP.

The server runs as a child process with its own cache and database, the offline `docs`
platform over a tiny corpus (`vectors` is made unavailable: no model is loaded), and searxng
platforms on a stub server in this process: `slow` answers after a delay (several progress
notifications), `fail` with HTTP 500 (a partial search), `flaky` with HTTP 500 to queries containing
`zz500` (a failed query), `held` only when the test releases
its gate (a search that stays running for start/status/cancel).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError

from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.request import MAX_QUERIES, SearchRequest
from tests.support.mcp_harness import http_server, stdio_server, structured, text
from tests.support.option_scenarios import web_platforms

DOCS = {
    "L1": "A laser produces coherent light by stimulated emission.",
    "L2": "Semiconductor lasers emit light from a forward biased junction.",
    "P1": "Plasma waves propagate in the ionosphere.",
    "P2": "Plasma oscillations and waves in a magnetic field.",
}
DOUBLES = {
    "slow": "delay/0.6",
    "fail": "status/500",
    "held": "gate/held",
    "flaky": "fail-query/zz500",
}


@pytest.fixture(scope="module")
def stub() -> Iterator[StubSearxServer]:
    with StubSearxServer() as server:
        yield server


@pytest.fixture
def env(tmp_path: Path, stub: StubSearxServer) -> Iterator[dict[str, str]]:
    """docs and the stub platforms: `all` would wait for `held`, so tests name platforms."""
    corpus = tmp_path / "lab.trec"
    corpus.write_text(
        "".join(f"<DOC>\n<DOCNO>{k}</DOCNO>\n<TEXT>{v}</TEXT>\n</DOC>\n" for k, v in DOCS.items())
    )
    yield {
        "FANFUSE_CACHE_DIR": str(tmp_path / "cache"),
        "FANFUSE_DB_PATH": str(tmp_path / "fanfuse.db"),
        "FANFUSE_DOCS_CORPUS": str(corpus),
        "FANFUSE_VECTORS_CORPUS": str(tmp_path / "no-such-corpus"),
        "FANFUSE_EXTRA_PLATFORMS": json.dumps(web_platforms(stub, DOUBLES)),
        "FANFUSE_PROGRESS_INTERVAL": "0",
        "FANFUSE_DEADLINE_SECONDS": "30",
    }
    stub.reset()  # releases a held request a failed test left waiting


@pytest.fixture
def docs_only(env: dict[str, str]) -> dict[str, str]:
    """Only `docs` is available, so `all` (the default platform) is docs."""
    return {k: v for k, v in env.items() if k != "FANFUSE_EXTRA_PLATFORMS"}


async def reached(stub: StubSearxServer, gate: str) -> None:
    """Until a platform's request waits at `gate` (its run is then `running`), 10 s at most."""
    for _ in range(500):
        if stub.waiting(gate):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no request reached gate {gate!r} in 10 s")


def client(env: dict[str, str], *args: str) -> Client:
    return Client(stdio_server(env, *args), read_timeout_seconds=30)


async def test_the_tools_take_the_http_apis_request_with_its_defaults_and_limits(
    env: dict[str, str],
) -> None:
    async with client(env) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(tools) == {
        "search", "start_search", "get_search_status", "cancel_search", "list_platforms",
    }  # fmt: skip
    for name in ("search", "start_search"):
        schema = tools[name].input_schema
        props = schema["properties"]
        assert set(props) == set(SearchRequest.model_fields)  # every field, whatever is added
        assert schema["required"] == ["query"] and schema["additionalProperties"] is False
        assert props["platform"]["default"] == "all"
        string, array = props["query"]["anyOf"]
        assert string["type"] == "string" and array["maxItems"] == MAX_QUERIES
        assert props["max_results"] | {"description": ""} == {
            "default": 10, "minimum": 1, "maximum": 100, "type": "integer",
            "title": "Max Results", "description": "",
        }  # fmt: skip
        assert props["timeout_s"]["minimum"] == 0.5
        assert props["cache"]["default"] == "auto"
        assert props["include_domains"]["anyOf"][1]["maxItems"] == 20
    assert tools["get_search_status"].input_schema["required"] == ["task_id"]
    for tool in tools.values():
        assert tool.output_schema and tool.output_schema["type"] == "object"


async def test_search_with_two_queries_gives_one_numbered_section_each(
    docs_only: dict[str, str],
) -> None:
    async with client(docs_only) as c:
        result = await c.call_tool(
            "search", {"query": ["laser light", "plasma waves"], "max_results": 3}
        )
    md, data = text(result), structured(result)
    first, second, status = md.split("\n\n---\n\n")
    assert first.startswith('## Query 1: "laser light"\n\n1. **')
    assert second.startswith('## Query 2: "plasma waves"\n\n1. **')
    assert "\n   https://" in first and "\n   platforms: " in first
    assert status.startswith("**completed**: ") and data["task_id"] in status
    assert data["status"] == "completed" and data["percent"] == 100
    assert [p["name"] for p in data["platforms"]] == ["docs"]  # `platform` defaulted to all
    assert [q["query"] for q in data["queries"]] == ["laser light", "plasma waves"]
    assert all(1 <= len(q["results"]) <= 3 for q in data["queries"])
    top = data["queries"][0]["results"][0]
    assert set(top) >= {"rank", "title", "url", "snippet", "platforms"} and top["rank"] == 1


async def test_a_failed_platform_makes_a_partial_search_named_on_the_status_line(
    env: dict[str, str],
) -> None:
    async with client(env) as c:
        result = await c.call_tool("search", {"query": "laser", "platform": "docs, fail"})
    md, data = text(result), structured(result)
    assert md.startswith('## Query 1: "laser"\n\n1. **')
    status = md.rsplit("\n\n---\n\n", 1)[1]
    assert status.startswith("**partial**: ") and "Failed: fail (failed: HTTP 500: " in status
    assert data["failed_platforms"] == ["fail"]
    assert "- failed on" not in md  # the platform is named once, on the status line


async def test_a_chain_and_hedge_after_s_are_arguments_like_the_apis(
    env: dict[str, str],
) -> None:
    """`fail|slow`: slow answers in fail's place; the digest says which member answered."""
    args = {"query": "laser", "platform": "docs, fail|slow", "hedge_after_s": "off"}
    async with client(env) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert "hedge_after_s" in tools["search"].input_schema["properties"]
        result = await c.call_tool("search", args)
    data = structured(result)
    assert data["status"] == "completed" and data["failed_platforms"] == []
    runs = {p["name"]: p for p in data["platforms"]}
    assert runs["fail"]["answered_by"] == ["slow"]
    platforms = {name for r in data["queries"][0]["results"] for name in r["platforms"]}
    assert platforms <= {"docs", "slow"} and "slow" in platforms


async def test_a_failed_query_is_named_in_its_section(env: dict[str, str]) -> None:
    async with client(env) as c:
        result = await c.call_tool(
            "search", {"query": ["laser", "zz500 laser"], "platform": "docs, flaky"}
        )
    first, second, status = text(result).split("\n\n---\n\n")
    assert "failed on" not in first
    assert "\n- failed on flaky: HTTP 500: " in second
    assert status.startswith("**partial**: ") and "Failed:" not in status
    failed = structured(result)["queries"][1]["failed"]
    assert len(failed) == 1 and failed[0].startswith("flaky: HTTP 500: ")


async def test_a_bad_argument_is_a_tool_error_with_the_apis_message_naming_the_field(
    env: dict[str, str],
) -> None:
    async with client(env) as c:
        bad = await c.call_tool(
            "search", {"query": ["q"] * 6, "platform": "docs, nope", "colour": "red"}
        )
        missing = await c.call_tool("start_search", {"platform": "docs"})
        no_id = await c.call_tool("get_search_status", {})
        unknown = await c.call_tool("cancel_search", {"task_id": "nope"})
        still_fine = await c.call_tool("list_platforms", {})
    assert bad.is_error and text(bad) == (
        "query: at most 5 queries per request, got 6; platform: unknown platform 'nope'; "
        "available: docs, slow, fail, held, flaky; colour: unknown field"
    )
    assert missing.is_error and text(missing) == "query: field required"
    assert no_id.is_error and text(no_id) == "task_id: field required"
    assert unknown.is_error and text(unknown) == "no search with task_id 'nope'"
    assert not still_fine.is_error  # the connection survived them all


async def test_start_status_and_cancel_round_trip(
    env: dict[str, str], stub: StubSearxServer
) -> None:
    async with client(env) as c:
        started = await c.call_tool("start_search", {"query": "laser", "platform": "docs, held"})
        task_id = structured(started)["task_id"]
        assert f'task_id "{task_id}"' in text(started)
        await reached(stub, "held")
        running = await c.call_tool("get_search_status", {"task_id": task_id})
        data = structured(running)
        assert data["status"] == "running" and data["queries"] == []
        states = {p["name"]: p["state"] for p in data["platforms"]}
        assert states["held"] == "running"
        assert text(running).startswith(f"Search {task_id} is running: ")
        assert f'get_search_status with task_id "{task_id}"' in text(running)

        cancelled = structured(await c.call_tool("cancel_search", {"task_id": task_id}))
        assert cancelled["status"] == "cancelled"
        after = await c.call_tool("get_search_status", {"task_id": task_id})
        assert structured(after)["status"] == "cancelled"
        status_text = text(after).split("\n\nTimeline (", 1)[0]  # then its timeline
        assert status_text.endswith(f"**cancelled**: Search cancelled (task_id {task_id})")
        again = await c.call_tool("cancel_search", {"task_id": task_id})
        assert again.is_error and text(again) == f"search {task_id} is already cancelled"


async def test_search_reports_progress_on_each_change(env: dict[str, str]) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with client(env) as c:
        result = await c.call_tool(
            "search", {"query": "laser", "platform": "docs, slow"}, progress_callback=on_progress
        )
    assert structured(result)["status"] == "completed"
    percents = [p for p, _, _ in seen]
    assert len(seen) >= 3, seen
    assert percents == sorted(percents) and percents[-1] == 100
    assert {total for _, total, _ in seen} == {100}
    messages = [m for _, _, m in seen]
    assert len(set(messages)) == len(messages)  # one notification per change
    assert any(m and m.startswith("Platform 2/2 (slow)") for m in messages), messages
    assert messages[-1] and messages[-1].startswith("Multi-platform search completed: 2/2")


async def test_search_returns_a_running_search_at_the_servers_bound(
    env: dict[str, str],
) -> None:
    async with client(env, "--max-wait", "0.5") as c:
        began = time.monotonic()
        result = await c.call_tool("search", {"query": "laser", "platform": "held"})
        waited = time.monotonic() - began
        data = structured(result)
        # At its 0.5 s bound, not the 30 s deadline: the upper bound leaves a busy machine's
        # first call of a fresh server its imports (5 s was once outrun at load 10).
        assert data["status"] == "running" and 0.5 <= waited < 15
        assert f'get_search_status with task_id "{data["task_id"]}"' in text(result)
        await c.call_tool("cancel_search", {"task_id": data["task_id"]})


async def test_search_at_its_bound_returns_the_preview_marked_as_such(
    env: dict[str, str], stub: StubSearxServer
) -> None:
    # `held` never answers before its release, so the call ends at its bound whatever that
    # is: 8 s leaves a fresh server's first `docs` search (its index loaded) time to answer
    # first on a busy machine, where 1 s once did not (no preview at the bound).
    async with client(env, "--max-wait", "8") as c:
        result = await c.call_tool("search", {"query": "laser", "platform": "docs, held"})
        data = structured(result)
        assert data["status"] == "running" and data["queries"] == []
        preview = data["preview"]
        assert preview["partial"] is True and preview["platforms"] == ["docs"]
        [query] = preview["queries"]
        assert query["query"] == "laser" and query["results"]
        assert query["results"][0]["platforms"] == ["docs"]
        assert "PREVIEW (partial, fused from docs so far):" in text(result)
        status = structured(await c.call_tool("get_search_status", {"task_id": data["task_id"]}))
        assert status["preview"]["platforms"] == ["docs"]
        stub.release("held")
        done = await c.call_tool("get_search_status", {"task_id": data["task_id"]})
        for _ in range(100):
            if structured(done)["status"] != "running":
                break
            await asyncio.sleep(0.1)
            done = await c.call_tool("get_search_status", {"task_id": data["task_id"]})
        final = structured(done)
        assert final["status"] == "completed" and final.get("preview") is None
        assert "PREVIEW" not in text(done)


async def test_a_search_call_the_client_gives_up_on_cancels_the_search(
    env: dict[str, str], stub: StubSearxServer
) -> None:
    async with client(env) as c:
        with pytest.raises(MCPError):  # the client's timeout sends notifications/cancelled
            await c.call_tool(
                "search", {"query": "laser", "platform": "held"}, read_timeout_seconds=1
            )
        assert await c.call_tool("list_platforms", {})  # the connection is still up
        for _ in range(250):
            with sqlite3.connect(env["FANFUSE_DB_PATH"]) as db:
                statuses = [row[0] for row in db.execute("SELECT status FROM tasks")]
            if statuses == ["cancelled"]:
                break
            await asyncio.sleep(0.02)
    assert statuses == ["cancelled"]


async def test_over_streamable_http(env: dict[str, str]) -> None:
    with http_server(env) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        async with Client(url, read_timeout_seconds=30) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            result = await c.call_tool("search", {"query": "plasma waves", "platform": "docs"})
    assert "search" in names and "list_platforms" in names
    md, data = text(result), structured(result)
    assert md.startswith('## Query 1: "plasma waves"\n\n1. **')
    assert data["status"] == "completed" and data["queries"][0]["results"]


async def test_list_platforms_says_why_the_others_are_not_available(
    env: dict[str, str],
) -> None:
    async with client(env) as c:
        result = await c.call_tool("list_platforms", {})
    found: dict[str, Any] = {p["name"]: p for p in structured(result)["platforms"]}
    assert found["docs"]["available"] and found["slow"]["available"]
    assert not found["vectors"]["available"] and found["vectors"]["reason"]
    assert "- docs: available" in text(result)
    assert "- google: not available (missing or invalid settings: " in text(result)
