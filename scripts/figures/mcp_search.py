"""The MCP figures of issue 9: the tool list and one `search`, over stdio and streamable HTTP.

Run from the repository root with the venv active: `python scripts/figures/mcp_search.py`.
Only the offline `docs` platform is deployed, and the database is a temporary file.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mcp import Client

from tests.support.mcp_harness import http_server, stdio_server, text

ARGS = {"query": ["microwave dielectric constant", "plasma waves"], "max_results": 3}


async def show(client: Any) -> None:
    tools = (await client.list_tools()).tools
    print("tools:", [t.name for t in tools])
    search = next(t for t in tools if t.name == "search")
    print("search input properties:", list(search.input_schema.get("properties", {})))

    async def progress(done: float, total: float | None, message: str | None) -> None:
        print(f"  progress {done}/{total}: {message}")

    result = await client.call_tool("search", ARGS, progress_callback=progress)
    print(text(result))
    print("structured content keys:", list((result.structured_content or {}).keys()))


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {"FANFUSE_DB_PATH": f"{tmp}/mcp.db", "FANFUSE_DEPLOYED_PLATFORMS": '["docs"]'}
        print("=== stdio")
        async with Client(stdio_server(env), read_timeout_seconds=60) as client:
            await show(client)
        print("=== streamable HTTP")
        with http_server(env) as url:
            print("url", url)
            async with Client(url, read_timeout_seconds=60) as client:
                await show(client)


if __name__ == "__main__":
    asyncio.run(main())
