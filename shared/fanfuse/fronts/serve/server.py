"""Running `serve`: bind first, tell the address, serve, say `ready`, stop cleanly.

The socket is bound before uvicorn starts (port 0: the OS picks a free port), so the address is
known before anything else happens: it becomes the service's own URLs (`settings_for`: the
`status_url` and `cancel_url` of every accepted search point back here, built by the service as
for the functions) and the first line printed, `url http://HOST:PORT`. Then `api_key ff_...`,
the key for owner `local` the lifespan creates (valid until the server stops), and last `ready`,
once uvicorn has run the lifespan (runtime entered, platforms warmed) and listens: a parent
process waits for it instead of polling the port.

Ctrl-C and SIGTERM both end in uvicorn's graceful shutdown (open connections get
`SHUTDOWN_TIMEOUT` seconds; the lifespan closes the runtime and its store); then `run_server`
returns. uvicorn re-raises the signal it caught once it has shut down, which for SIGTERM would
kill the process with no exit status of its own: a SIGTERM handler that raises
KeyboardInterrupt, caught here, makes both signals one clean exit.
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Callable, Sequence
from types import FrameType

import uvicorn

from fanfuse.fronts.serve.app import create_app, warm_names
from fanfuse.http.routes import PUBLIC_TARGETS
from fanfuse.platforms import Registry
from fanfuse.settings import Settings, get_settings

SHUTDOWN_TIMEOUT = 5
"""Seconds open connections (an event stream, a waiting `/search`) get at shutdown."""

Announce = Callable[[str], None]


def _print(line: str) -> None:
    print(line, flush=True)


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on host:port (0: a free port).

    Made with its protocol named, IPPROTO_TCP: asyncio turns Nagle off (TCP_NODELAY) only on
    connections whose socket says so, and with Nagle on, an answer uvicorn writes in two parts
    (headers, then body) waited for the client's delayed ACK: 40 ms on every keep-alive POST.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def settings_for(base: str, settings: Settings) -> Settings:
    """`settings` with this server's routes as the function URLs the service builds links from."""
    urls = {name: f"{base.rstrip('/')}/{name}" for name in PUBLIC_TARGETS}
    return settings.model_copy(
        update={
            "function_urls": {**settings.function_urls, **urls},
            "status_url_base": urls["search_status"],
        }
    )


class _Server(uvicorn.Server):
    """uvicorn's server, announcing `ready` once it has started (lifespan done, listening)."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_ready()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run_server(
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    public_url: str | None = None,
    warm: Sequence[str] | None = None,
    log_level: str = "warning",
    announce: Announce = _print,
    settings: Settings | None = None,
) -> None:
    """Serve until Ctrl-C or SIGTERM; RuntimeError when the application did not start.

    `public_url`: the base of the links handed out, when clients reach this server under
    another address than the bound one (a proxy, a 0.0.0.0 bind).
    """
    settings = settings or get_settings()
    registry = Registry.from_settings(settings)
    names = warm_names(registry, warm)  # a bad name fails here, before anything is bound
    sock = bind(host, port)
    base = public_url or url_of(sock)
    announce(f"url {base}")
    app = create_app(
        settings_for(base, settings),
        registry=registry,
        warm=names,
        on_key=lambda key: announce(f"api_key {key}"),
    )
    config = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=SHUTDOWN_TIMEOUT,
    )
    server = _Server(config, lambda: announce("ready"))
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
        sock.close()
    if not server.started:
        raise RuntimeError("fanfuse serve did not start (see the log above)")
