"""Cross-origin access to the public targets, for a page served from another origin.

Why any: `fanfuse dev` serves the search page from its own port while each function listens on
another, so the page's calls are cross-origin and a browser sends them only when the target
answers with CORS headers. Why so little: a deployment lists the origins it trusts
(`Settings.cors_origins`, default none), and an origin not listed gets no CORS header at all, so
the browser keeps refusing it as before. No credentials mode (`Allow-Credentials`): the page
sends its key in `X-Api-Key`, which a script must set on purpose; cookies are never involved.
`serve` needs none of this (page and API share one origin).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

ALLOWED_HEADERS = ("Authorization", "Content-Type", "X-Api-Key", "Last-Event-ID")
"""What the page (and an app like it) sets: its credential and its JSON body's type."""
EXPOSED_HEADERS = ("Location", "Retry-After")
"""What the page reads from an answer besides the body (a 429's or 503's Retry-After)."""
MAX_AGE_SECONDS = 600


def allowed_origin(origin: str | None, allowed: Iterable[str]) -> str | None:
    """`origin` when the deployment lists it (exactly, trailing `/` ignored), else None."""
    if not origin:
        return None
    wanted = origin.rstrip("/")
    return wanted if any(wanted == a.rstrip("/") for a in allowed) else None


def answer_headers(origin: str | None, allowed: Iterable[str]) -> dict[str, str]:
    """The headers an answer to `origin` carries: none for an origin not listed. `Vary:
    Origin` whenever a list exists, so a cache never serves one origin's answer to another."""
    allowed = list(allowed)
    if not allowed:
        return {}
    found = allowed_origin(origin, allowed)
    if found is None:
        return {"Vary": "Origin"}
    return {
        "Access-Control-Allow-Origin": found,
        "Access-Control-Expose-Headers": ", ".join(EXPOSED_HEADERS),
        "Vary": "Origin",
    }


def preflight_headers(
    origin: str | None, allowed: Iterable[str], methods: Sequence[str]
) -> dict[str, str] | None:
    """The answer to a preflight (`OPTIONS` with `Access-Control-Request-Method`) from a listed
    origin, or None: then the target answers OPTIONS as it always did (405)."""
    base = answer_headers(origin, allowed)
    if "Access-Control-Allow-Origin" not in base:
        return None
    return {
        **base,
        "Access-Control-Allow-Methods": ", ".join(methods),
        "Access-Control-Allow-Headers": ", ".join(ALLOWED_HEADERS),
        "Access-Control-Max-Age": str(MAX_AGE_SECONDS),
    }
