"""The search page: a static HTML, CSS and JavaScript page at `/`, served with a strict CSP.

Why static and public: the page holds no secret and no server-side state. Every call it makes
(`platforms`, `start_search`, the event stream, `cancel_search`) carries the API key the user
typed, kept in the tab's sessionStorage, and is verified like any other caller's; so the page
itself needs no authentication, and a page that anyone can load gives nobody anything.

Why no build step and no CDN: the three files are the page, shipped as package data
(`static/`), read once at import. Nothing is fetched from elsewhere, so the Content-Security-
Policy can allow only this origin: `script-src 'self'` (no inline script, no inline event
handler, no `eval`), `connect-src 'self'`, no frames, no plugins, no form posting elsewhere.
The JavaScript inserts every field a provider returned with `textContent`, never as HTML, and
makes a link only of an http(s) URL: the CSP is the second wall, not the first.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import Response

STATIC = resources.files("fanfuse.fronts.serve") / "static"
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "page.js": "text/javascript; charset=utf-8",
    "page.css": "text/css; charset=utf-8",
}
"""The page's files and their types: only these are served (no directory, no path walking)."""

CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Revalidated on each load: an upgraded server never runs an old script against a new API.
    "Cache-Control": "no-cache",
}


def _read(name: str) -> bytes:
    return (STATIC / name).read_bytes()


BODIES = {name: _read(name) for name in ASSETS}


def asset(name: str) -> Response | None:
    """The page file `name` with its type and the page's headers; None when there is none."""
    if name not in ASSETS:
        return None
    return Response(BODIES[name], media_type=ASSETS[name], headers=HEADERS)


def index(request: Request) -> Response:
    answer = asset("index.html")
    assert answer is not None  # a shipped file
    return answer
