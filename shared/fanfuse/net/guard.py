"""The network guard and bounded redirects, for every fetch of a URL that a search result gave.

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
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urljoin

import httpx

from fanfuse.errors import Refused
from fanfuse.models import CallRecord
from fanfuse.net.policy import BROWSER_USER_AGENT, MAX_REDIRECTS, PAGE_FETCH, CallPolicy
from fanfuse.net.runner import RequestSpec, Response, Runner

REDIRECTS = frozenset({301, 302, 303, 307, 308})

Resolver = Callable[[str, int], Awaitable[list[str]]]


class AddressPolicy(Protocol):
    """Which non-public addresses a deployment lets fetches reach (none, by default)."""

    @property
    def allow_private(self) -> bool: ...

    @property
    def allow_loopback(self) -> bool: ...


@dataclass(frozen=True)
class FetchPolicy:
    """How an untrusted URL is fetched: the address policy, redirects, agent and call limits."""

    allow_private: bool = False
    allow_loopback: bool = False
    max_redirects: int = MAX_REDIRECTS
    user_agent: str = BROWSER_USER_AGENT
    call: CallPolicy = PAGE_FETCH


async def system_resolver(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def address_problem(ip: str, policy: AddressPolicy) -> str | None:
    """Why `ip` may not be fetched, or None."""
    addr = ipaddress.ip_address(ip.split("%")[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if addr.is_loopback:
        return None if policy.allow_loopback or policy.allow_private else "loopback"
    for kind in ("link_local", "private", "reserved", "multicast", "unspecified"):
        if getattr(addr, f"is_{kind}"):
            return None if policy.allow_private else kind.replace("_", "-")
    return None


async def check_url(url: str, policy: AddressPolicy, resolver: Resolver = system_resolver) -> None:
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
        problem = address_problem(ip, policy)
        if problem:
            raise Refused(f"{host} resolves to a {problem} address ({ip}); not fetched")


async def get(
    runner: Runner,
    key: str,
    url: str,
    policy: FetchPolicy,
    calls: list[CallRecord] | None,
    *,
    accept_types: Sequence[str] | None = None,
    resolver: Resolver = system_resolver,
) -> tuple[Response, str]:
    """GET `url`, following at most `max_redirects` redirects, each hop checked first.

    Returns the last answer and the URL it came from.
    """
    headers = {"User-Agent": policy.user_agent, "Accept": "text/html,text/plain;q=0.9,*/*;q=0.5"}
    for _ in range(policy.max_redirects + 1):
        await check_url(url, policy, resolver)
        spec = RequestSpec(url=url, headers=headers, follow_redirects=False)
        response = await runner.request(key, spec, policy.call, calls, accept_types=accept_types)
        location = response.headers.get("location")
        if response.status in REDIRECTS and location:
            url = urljoin(url, location)
            continue
        return response, url
    raise Refused(f"more than {policy.max_redirects} redirects")
