"""`fanfuse mcp --endpoint`: the MCP tools over a real HTTP API, the emulator stack's functions.

The server runs as a child process that knows nothing but the start_search URL; every call goes
through `HttpSearchClient` to the functions, so validation, status and cancel are the API's.
"""

from __future__ import annotations

import asyncio

from mcp import Client

from tests.support.e2e.cloud import Cloud
from tests.support.mcp_harness import stdio_server, structured, text


async def test_the_tools_over_the_http_api(e2e: Cloud) -> None:
    key = {"FANFUSE_API_KEY": e2e.addresses.api_key or ""}  # from the environment, as a user would
    params = stdio_server(key, "--endpoint", e2e.url("start_search"))
    async with Client(params, read_timeout_seconds=60) as c:
        found = await c.call_tool(
            "search", {"query": ["tunnelling", "plasma"], "platform": "docs", "max_results": 3}
        )
        bad = await c.call_tool("search", {"query": "x", "platform": "docs, nope"})
        started = await c.call_tool("start_search", {"query": "held", "platform": "web_gate"})
        task_id = structured(started)["task_id"]
        for _ in range(500):  # until the worker waits at the gate: the search is running
            if e2e.stub.waiting("web_gate"):
                break
            await asyncio.sleep(0.02)
        running = structured(await c.call_tool("get_search_status", {"task_id": task_id}))
        cancelled = structured(await c.call_tool("cancel_search", {"task_id": task_id}))
        platforms = await c.call_tool("list_platforms", {})

    md, data = text(found), structured(found)
    first, second, status = md.split("\n\n---\n\n")
    assert first.startswith('## Query 1: "tunnelling"\n\n1. **')
    assert second.startswith('## Query 2: "plasma"\n\n1. **')
    assert status.startswith("**completed**: ") and data["status"] == "completed"

    assert bad.is_error
    assert text(bad).startswith("platform: unknown platform 'nope'; available: docs, vectors")

    assert running["status"] == "running" and running["queries"] == []
    assert cancelled["status"] == "cancelled"
    assert e2e.url("start_search") in text(platforms)
