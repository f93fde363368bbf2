"""Who may use `fanfuse mcp --http`: when callers must authenticate, which Host and Origin
headers are served, and the gate that verifies each request as `fanfuse serve` does.

- Callers authenticate (an API key in `X-Api-Key`, or `Authorization: Bearer <ID token>`,
  verified by `auth.callers.Authenticator` against the runtime's store, the one `fanfuse keys`
  and `fanfuse serve` use) whenever the server binds anything but a loopback address
  (`authenticates`), and on loopback too when asked (`--require-auth`, `FANFUSE_MCP_REQUIRE_AUTH`).
  A bind to a name other than `localhost` counts as exposed: what a name resolves to is not
  known here, and guessing wrong would serve the network unauthenticated.
- The SDK's DNS-rebinding protection (Host and Origin checked, 421/403) is on whatever the bind:
  a web page the user opens could otherwise reach a loopback server through a name that
  resolves to 127.0.0.1. It serves the loopback names, the bound host (unless a wildcard such as
  0.0.0.0, which is no name anyone sends), and the names the deployment adds
  (`--allowed-host`, `FANFUSE_MCP_ALLOWED_HOSTS`).
- Each tool call acts for the caller of the HTTP request that carried it (`caller_of`): the
  searches it starts are that caller's, and it sees and cancels only those (and ownerless ones,
  started by the embedded CLI). Over stdio, and over HTTP on loopback without authentication,
  the one local user is LOCAL_CALLER: `local:mcp`, a namespace no credential can name, so a
  `fanfuse serve` caller sharing the database still cannot read the MCP server's searches, nor
  it theirs.
"""

from __future__ import annotations

import ipaddress
import json
from collections import OrderedDict
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fanfuse.auth.callers import Authenticator
from fanfuse.http import api
from fanfuse.wire.errors import FanfuseError, Unauthorized
from fanfuse.wire.models import Caller

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
"""The names a local client uses for a loopback server (the SDK's own default list)."""
WILDCARDS = ("", "0.0.0.0", "::", "[::]")
"""Bind addresses meaning every interface: no client sends one as its Host."""
LOCAL_CALLER = Caller(subject="local:mcp", via="local")
SESSION_HEADER = "mcp-session-id"
SESSIONS = 10_000
"""Sessions whose opener the gate remembers; an older one is refused (404) and reopened."""
CALLER_KEY = "fanfuse.caller"
"""Where the gate leaves the verified Caller in the ASGI scope, for the tool call to read."""


def is_loopback(host: str) -> bool:
    """Whether binding `host` listens on loopback only: 127.0.0.0/8, ::1 (IPv4-mapped too),
    or `localhost`. A wildcard (0.0.0.0, ::), any other address and any other name: False."""
    name = host.strip().removeprefix("[").removesuffix("]").lower()
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def authenticates(host: str, require_auth: bool) -> bool:
    """Whether the HTTP server verifies its callers: always, unless bound to loopback only and
    not asked to."""
    return require_auth or not is_loopback(host)


def _bracketed(name: str) -> str:
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def served_names(host: str, extra: list[str]) -> list[str]:
    """The host names the server answers to: loopback's, the bound host, the configured ones."""
    bound = [] if host.strip() in WILDCARDS else [host.strip()]
    return list(dict.fromkeys(_bracketed(n.lower()) for n in (*LOOPBACK_NAMES, *bound, *extra)))


def transport_security(host: str, extra: list[str]) -> TransportSecuritySettings:
    """The SDK's Host/Origin checks for `served_names`, with or without a port."""
    names = served_names(host, extra)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[h for n in names for h in (n, f"{n}:*")],
        allowed_origins=[
            origin
            for n in names
            for scheme in ("http", "https")
            for origin in (f"{scheme}://{n}", f"{scheme}://{n}:*")
        ],
    )


def caller_of(request: Any, gated: bool) -> Caller:
    """The caller a tool call acts for: the gate's verified one, else LOCAL_CALLER where no
    one authenticates. Behind the gate a request without one is refused, never made local."""
    scope = getattr(request, "scope", None)
    found = scope.get(CALLER_KEY) if isinstance(scope, dict) else None
    if isinstance(found, Caller):
        return found
    if gated:
        raise Unauthorized("this request was not authenticated")
    return LOCAL_CALLER


class CallerGate:
    """ASGI middleware: every HTTP request is verified before the MCP app sees it; a refusal
    is the API's JSON error (401 with WWW-Authenticate, 403), and no MCP session is touched.

    A credential is always required here, whatever `auth_required` says: that setting is for a
    deployment behind something that authenticates for it, and nothing stands in front of this
    server. The check runs on the event loop, as `fanfuse serve`'s does (a key read is a local
    SQLite read, cached; an ID token's key set is fetched rarely, certs.py).

    An MCP session belongs to the caller whose request opened it (the answer that carried its
    `Mcp-Session-Id`): another caller naming it gets the SDK's own answer to an unknown session,
    404, so a session id seen in a log or a proxy does not let another tenant close the session
    or read its stream. The last SESSIONS sessions are remembered (the SDK ends idle ones).
    """

    def __init__(self, app: ASGIApp, authenticator: Authenticator) -> None:
        self.app = app
        self.auth = authenticator
        self._owners: OrderedDict[str, str] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            caller = self.auth.caller(Headers(scope=scope))
            if caller is None:
                raise Unauthorized("no credentials: send X-Api-Key or Authorization: Bearer")
        except FanfuseError as exc:
            await _refuse(exc, send)
            return
        scope[CALLER_KEY] = caller
        session = Headers(scope=scope).get(SESSION_HEADER)
        if session is not None:
            if self._owners.get(session) != caller.subject:
                body = {"error": "not_found", "message": "no such MCP session", "problems": []}
                await _send_json(404, body, {}, send)
                return
            await self.app(scope, receive, send)
            return

        async def opening(message: Message) -> None:
            if message["type"] == "http.response.start":
                opened = Headers(raw=message.get("headers", [])).get(SESSION_HEADER)
                if opened is not None:
                    self._owners[opened] = caller.subject
                    while len(self._owners) > SESSIONS:
                        self._owners.popitem(last=False)
            await send(message)

        await self.app(scope, receive, opening)


async def _refuse(exc: FanfuseError, send: Send) -> None:
    answer = api.error_answer(exc)
    await _send_json(answer.status, answer.body, answer.headers, send)


async def _send_json(status: int, body: dict[str, Any], extra: dict[str, str], send: Send) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
