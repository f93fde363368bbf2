"""The search page: a static HTML, CSS and JavaScript page at `/`, served with a strict CSP.

Why static and public: the page holds no secret and no server-side state. Every call it makes
(`platforms`, `start_search`, the event stream, `cancel_search`) carries the API key the user
typed, kept in the tab's sessionStorage, and is verified like any other caller's; so the page
itself needs no authentication, and a page that anyone can load gives nobody anything.

Why no build step and no CDN: the three files are the page, shipped as package data
(`static/`), read once at import. Nothing is fetched from elsewhere, so the Content-Security-
Policy can allow only this origin: `script-src 'self'` (no inline script, no inline event
handler, no `eval`), `connect-src 'self'`, no frames, no plugins, no form posting elsewhere.

`config.json` tells the script where its calls go and how it follows a search. serve's (the
shipped file) names its own routes, relative, and its event stream; the local functions stack
(`fanfuse.tools.devstack.page_server`) serves the same three files with a config of its own: each
target's URL, no event stream (the page then polls `search_status`, whose view carries the
progress and the fused preview as the stream's events do), and its CSP's `connect-src` lists
exactly those targets' origins. One page, the transport picked by the config, not by a copy.

The JavaScript inserts every field a provider returned with `textContent`, never as HTML, and
makes a link only of an http(s) URL: the CSP is the second wall, not the first.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:  # serve's answers are Starlette's; the page's own server needs no framework
    from starlette.requests import Request
    from starlette.responses import Response

STATIC = resources.files("fanfuse.fronts.serve") / "static"
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "page.js": "text/javascript; charset=utf-8",
    "page.css": "text/css; charset=utf-8",
    "config.json": "application/json",
}
"""The page's files and their types: only these are served (no directory, no path walking)."""


def csp(connect: Sequence[str] = ()) -> str:
    """The page's policy; `connect` adds the origins its calls may reach besides its own (the
    local functions stack's targets, each on its own port), nothing else."""
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self'",
            " ".join(["connect-src 'self'", *connect]),
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )


def headers(connect: Sequence[str] = ()) -> dict[str, str]:
    """What every page file is answered with (`connect`: see `csp`)."""
    return {
        "Content-Security-Policy": csp(connect),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        # Revalidated on each load: an upgraded server never runs an old script against a new API.
        "Cache-Control": "no-cache",
    }


CSP = csp()
HEADERS = headers()


def _read(name: str) -> bytes:
    return (STATIC / name).read_bytes()


BODIES = {name: _read(name) for name in ASSETS}


def asset(name: str) -> Response | None:
    """The page file `name` with its type and the page's headers; None when there is none."""
    from starlette.responses import Response

    if name not in ASSETS:
        return None
    return Response(BODIES[name], media_type=ASSETS[name], headers=HEADERS)


def index(request: Request) -> Response:
    answer = asset("index.html")
    assert answer is not None  # a shipped file
    return answer


# ---------------------------------------------------------------------------------------------
# The page without serve: `python -m fanfuse.fronts.serve.page --port N --config JSON`, what the
# local functions stack runs (`fanfuse.tools.devstack.page_server`). The standard library's
# threading server, so `fanfuse dev` needs no web framework for one developer's tab.

CONFIG_NAME = "config.json"


def connect_origins(config: Mapping[str, object]) -> list[str]:
    """The origins a config's URLs name: what the CSP's `connect-src` adds, nothing more."""
    found = set()
    for value in config.values():
        if isinstance(value, str) and (parts := urlsplit(value)).scheme in {"http", "https"}:
            found.add(f"{parts.scheme}://{parts.netloc}")
    return sorted(found)


def page_server(host: str, port: int, config: Mapping[str, object]) -> ThreadingHTTPServer:
    """`/` and `/page/{name}` (GET and HEAD), `config.json` being `config`; 404 for the rest."""
    answer_headers = headers(connect_origins(config))
    bodies = {**BODIES, CONFIG_NAME: json.dumps(dict(config)).encode()}

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, send_body: bool) -> None:
            path = urlsplit(self.path).path
            name = "index.html" if path == "/" else path.removeprefix("/page/")
            body = bodies.get(name) if path == "/" or path.startswith("/page/") else None
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", ASSETS[name])
            self.send_header("Content-Length", str(len(body)))
            for key, value in answer_headers.items():
                self.send_header(key, value)
            self.end_headers()
            if send_body:
                self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer(True)

        def do_HEAD(self) -> None:
            self._answer(False)

        def log_message(self, format: str, *args: object) -> None:
            sys.stderr.write(f"page: {format % args}\n")

    return ThreadingHTTPServer((host, port), Handler)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m fanfuse.fronts.serve.page")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--config", required=True, help="page/config.json's content (JSON)")
    args = parser.parse_args(argv)
    with page_server(args.host, args.port, json.loads(args.config)) as server:
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
