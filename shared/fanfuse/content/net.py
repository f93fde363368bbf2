"""Network guard and bounded redirects for the content stages.

A search result is an untrusted URL: fetching it must not reach into the network the worker
runs in (cloud metadata at 169.254.169.254, private services, localhost). Every hop's host is
resolved and each of its addresses checked before the request, and redirects are followed one
hop at a time so that a public page cannot bounce the fetcher to a private one.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urljoin

import httpx

from fanfuse.content.settings import ContentSettings
from fanfuse.platforms.runner import CallPolicy, RequestSpec, Response, Runner

REDIRECTS = frozenset({301, 302, 303, 307, 308})

Resolver = Callable[[str, int], Awaitable[list[str]]]


class Refused(Exception):
    """The URL may not be fetched (its address, scheme or redirect chain is not allowed)."""


async def system_resolver(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def address_problem(ip: str, settings: ContentSettings) -> str | None:
    """Why `ip` may not be fetched, or None."""
    addr = ipaddress.ip_address(ip.split("%")[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if addr.is_loopback:
        return None if settings.allow_loopback or settings.allow_private else "loopback"
    for kind in ("link_local", "private", "reserved", "multicast", "unspecified"):
        if getattr(addr, f"is_{kind}"):
            return None if settings.allow_private else kind.replace("_", "-")
    return None


async def check_url(
    url: str, settings: ContentSettings, resolver: Resolver = system_resolver
) -> None:
    """Raise `Refused` unless every address `url`'s host resolves to may be fetched."""
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https"):
        raise Refused(f"scheme {parsed.scheme!r} is not fetched")
    host = parsed.host
    if not host:
        raise Refused("no host")
    try:
        ips = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            ips = await resolver(host, parsed.port or (443 if parsed.scheme == "https" else 80))
        except OSError as exc:
            raise Refused(f"cannot resolve {host}: {exc}") from exc
    for ip in ips:
        problem = address_problem(ip, settings)
        if problem:
            raise Refused(f"{host} resolves to a {problem} address ({ip}); not fetched")


async def get(
    runner: Runner,
    key: str,
    url: str,
    settings: ContentSettings,
    calls: list[dict[str, Any]] | None,
    *,
    accept_types: Sequence[str] | None = None,
    max_bytes: int | None = None,
    resolver: Resolver = system_resolver,
) -> tuple[Response, str]:
    """GET `url`, following at most `max_redirects` redirects, each hop checked first."""
    policy = CallPolicy(
        timeout=settings.timeout,
        max_concurrency=settings.concurrency,
        max_attempts=settings.max_attempts,
        max_body_bytes=max_bytes or settings.max_bytes,
    )
    headers = {"User-Agent": settings.user_agent, "Accept": "text/html,text/plain;q=0.9,*/*;q=0.5"}
    for _ in range(settings.max_redirects + 1):
        await check_url(url, settings, resolver)
        spec = RequestSpec(url=url, headers=headers, follow_redirects=False)
        response = await runner.request(key, spec, policy, calls, accept_types=accept_types)
        location = response.headers.get("location")
        if response.status in REDIRECTS and location:
            url = urljoin(url, location)
            continue
        return response, url
    raise Refused(f"more than {settings.max_redirects} redirects")
