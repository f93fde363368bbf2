"""Serve the tools over stdio (the default) or streamable HTTP, on the low-level MCP server.

The low-level `Server` is used rather than the decorator API because the tools' schemas come
from the request model, not from Python signatures. Over stdio, stdout carries nothing but the
protocol (logs go to stderr). Over HTTP, the bound address is printed as `url http://...:PORT/mcp`
and then `ready`, so a caller that asked for port 0 learns the port, as `fanfuse serve` does.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio
import httpx
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams

import fanfuse
from fanfuse.agent.backend import SearchBackend, open_backend
from fanfuse.agent.tools import Tools, tool_list
from fanfuse.settings import Settings

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "fanfuse searches many platforms at once and fuses their results. Call `search` with one "
    "query or up to 5 (`platform` defaults to all available platforms; see list_platforms); "
    "for long searches, start_search then get_search_status."
)


@dataclass
class McpOptions:
    http: bool = False
    host: str = "127.0.0.1"
    port: int = 8765
    endpoint: str | None = None
    """A deployed stack's start_search URL; None: the embedded runtime."""
    max_wait: float | None = None
    """How long `search` may wait at most; None: the deployment's deadline (embedded) or 120 s."""
    auth: httpx.Auth | None = field(default=None, repr=False)
    """The credential sent to `endpoint` (`fanfuse.auth.outbound`; never shown, not even by
    repr)."""


def log_to_stderr(level: int = logging.WARNING) -> None:
    """Logs on stderr, warnings and up: stdout is the protocol's (stdio) or the announcement's
    (HTTP), and a library logger set to DEBUG must not flood an agent's server log."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)


def build_server(backend: SearchBackend, max_wait: float) -> Server[Any]:
    tools = Tools(backend, max_wait)
    listed = tool_list(max_wait)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        async def report(percent: float, message: str) -> None:
            await ctx.session.report_progress(percent, 100.0, message)

        return await tools.call(params.name, params.arguments, report)

    return Server(
        "fanfuse",
        version=getattr(fanfuse, "__version__", "") or "0.1.0",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve(options: McpOptions, announce: TextIO = sys.stdout) -> None:
    """Run until stdin closes (stdio) or the process is stopped (HTTP)."""
    settings = Settings()
    max_wait = options.max_wait or (120.0 if options.endpoint else settings.deadline_seconds)
    async with open_backend(options.endpoint, settings, options.auth) as backend:
        server = build_server(backend, max_wait)
        if options.http:
            await _serve_http(server, options.host, options.port, announce)
        else:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())


async def _serve_http(server: Server[Any], host: str, port: int, announce: TextIO) -> None:
    import uvicorn

    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    async with anyio.create_task_group() as group:
        group.start_soon(web.serve)
        while not web.started:
            if web.should_exit:
                return
            await anyio.sleep(0.02)
        bound = web.servers[0].sockets[0].getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        announce.write(f"url http://{shown}:{bound}/mcp\nready\n")
        announce.flush()
