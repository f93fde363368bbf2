"""Serve the tools over stdio (the default) or streamable HTTP, on the low-level MCP server.

The low-level `Server` is used rather than the decorator API because the tools' schemas come
from the request model, not from Python signatures. Over stdio, stdout carries nothing but the
protocol (logs go to stderr). Over HTTP, the bound address is printed as `url http://...:PORT/mcp`
and then `ready`, so a caller that asked for port 0 learns the port, as `fanfuse serve` does.

Over HTTP, who may call and which Host/Origin headers are served is decided in `agent.access`:
callers authenticate as they do to `fanfuse serve` whenever the bind is not loopback-only (or
`require_auth`), the SDK's DNS-rebinding checks are always on, and each tool call acts for its
verified caller. An exposed server in front of a remote stack (`--endpoint`) is refused: it
would lend its own `--api-key` to every client.
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
from starlette.types import ASGIApp

from fanfuse.auth.callers import Authenticator
from fanfuse.fronts.mcp import access, tasks
from fanfuse.fronts.mcp.tools import Tools, tool_error, tool_list
from fanfuse.http.backend import EmbeddedBackend, SearchBackend, open_backend
from fanfuse.http.streams import StreamCap
from fanfuse.settings import get_settings
from fanfuse.support.version import __version__
from fanfuse.wire.errors import FanfuseError

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
    require_auth: bool = False
    """Verify callers on a loopback bind too (any other bind always does; fronts/mcp/access.py)."""
    allowed_hosts: list[str] = field(default_factory=list)
    """Host names served besides loopback's and the bound host (the Host/Origin checks)."""


class ExposedRemote(ValueError):
    """An authenticating MCP server asked to front a remote stack with its own credential."""


def log_to_stderr(level: int = logging.WARNING) -> None:
    """Logs on stderr, warnings and up: stdout is the protocol's (stdio) or the announcement's
    (HTTP), and a library logger set to DEBUG must not flood an agent's server log."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)


def build_server(
    backend: SearchBackend,
    max_wait: float,
    gated: bool = False,
    streams: StreamCap | None = None,
) -> Server[Any]:
    """The MCP server over `backend`; `gated`: HTTP requests carry a verified caller (the
    gate's), and a tool call acts for it, else for the local user (fronts/mcp/access.py);
    `streams`: the cap on each caller's listen streams (None: the setting's default)."""
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

        try:
            caller = access.caller_of(ctx.request, gated)
        except FanfuseError as exc:
            return tool_error(str(exc))
        return await tools.call(params.name, params.arguments, report, caller)

    server = Server(
        "fanfuse",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    extension = tasks.SearchTasks(backend, gated, streams)
    tasks.install(server, extension, call_tool)  # fronts/mcp/tasks.py
    return server


async def serve(options: McpOptions, announce: TextIO = sys.stdout) -> None:
    """Run until stdin closes (stdio) or the process is stopped (HTTP)."""
    settings = get_settings()
    max_wait = options.max_wait or (120.0 if options.endpoint else settings.deadline_seconds)
    gated = options.http and access.authenticates(
        options.host, options.require_auth or settings.mcp_require_auth
    )
    if gated and options.endpoint:
        raise ExposedRemote(
            f"an MCP server that authenticates its callers (bound to {options.host}, or "
            "--require-auth) cannot front --endpoint: every client would act with this "
            "server's credential. Bind 127.0.0.1, or run it on the embedded runtime"
        )
    async with open_backend(options.endpoint, settings, options.auth) as backend:
        server = build_server(backend, max_wait, gated, StreamCap(settings.max_streams_per_caller))
        if options.http:
            auth = None
            if gated:
                assert isinstance(backend, EmbeddedBackend)  # an endpoint was refused above
                auth = Authenticator(settings, backend.runtime.service.store)
            names = [*settings.mcp_allowed_hosts, *options.allowed_hosts]
            if not names and options.host.strip() in access.WILDCARDS:
                log.warning(
                    "bound to %s with no --allowed-host: only loopback Host names are served "
                    "(any other is 421)",
                    options.host,
                )
            app = http_app(server, options.host, names, auth)
            await _serve_http(app, options.host, options.port, announce)
        else:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())


def http_app(
    server: Server[Any], host: str, names: list[str], auth: Authenticator | None
) -> ASGIApp:
    """The streamable HTTP app for a bind to `host`: the Host/Origin checks for the served
    names, behind the caller gate when `auth` (fronts/mcp/access.py)."""
    app = server.streamable_http_app(
        host=host, transport_security=access.transport_security(host, names)
    )
    return app if auth is None else access.CallerGate(app, auth)


async def _serve_http(app: ASGIApp, host: str, port: int, announce: TextIO) -> None:
    import uvicorn

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
