"""The network guard and bounded redirects, for every fetch of a URL that a search result gave.

A search result is an untrusted URL: fetching it must not reach into the network the worker
runs in (cloud metadata at 169.254.169.254, private services, localhost). Every hop's host is
resolved and each of its addresses checked before the request, and redirects are followed one
hop at a time so that a public page cannot bounce the fetcher to a private one.

Only global addresses are fetched (`ipaddress`'s `is_global`: not private, loopback,
link-local, shared 100.64.0.0/10, reserved, documentation or benchmarking space), unless a
deployment allows private or loopback ones; the cloud metadata services are refused by name and
by number whatever it allows. The request then goes to the address that was checked, not to
the name: `pinned` puts the address in the URL and keeps the name in `Host` and in TLS (SNI and
certificate checks), so a second DNS answer (rebinding) cannot send it elsewhere.
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
METADATA_HOSTS = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data",
     "instance-data.ec2.internal", "metadata.azure.internal"}
)  # fmt: skip
"""Names of the cloud metadata services (GCP, AWS, Azure), refused before any lookup."""
METADATA_IPS = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200")
)
"""GCP/AWS/Azure, AWS ECS task metadata, AWS over IPv6, Alibaba Cloud: refused even where a
deployment allows private addresses (tests, local stacks)."""

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
    if addr in METADATA_IPS:
        return "cloud metadata"
    if addr.is_global:
        return None
    if addr.is_loopback:
        return None if policy.allow_loopback or policy.allow_private else "loopback"
    if policy.allow_private:
        return None
    for kind in ("link_local", "private", "reserved", "multicast", "unspecified"):
        if getattr(addr, f"is_{kind}"):
            return kind.replace("_", "-")
    return "non-global"  # shared address space (100.64.0.0/10) and the like


async def check_url(
    url: str, policy: AddressPolicy, resolver: Resolver = system_resolver
) -> list[str]:
    """The addresses `url`'s host resolves to, or `Refused` unless every one may be fetched."""
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https"):
        raise Refused(f"scheme {parsed.scheme!r} is not fetched")
    host = parsed.host
    if not host:
        raise Refused("no host")
    if host.lower().rstrip(".") in METADATA_HOSTS:
        raise Refused(f"{host} is a cloud metadata service; not fetched")
    try:
        ips = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            ips = await resolver(host, parsed.port or (443 if parsed.scheme == "https" else 80))
        except OSError as exc:
            raise Refused(f"cannot resolve {host}: {exc}") from exc
    if not ips:
        raise Refused(f"{host} resolves to no address")
    for ip in ips:
        problem = address_problem(ip, policy)
        if problem:
            raise Refused(f"{host} resolves to a {problem} address ({ip}); not fetched")
    return ips


def pinned(url: str, ip: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """`url` aimed at `ip`: the URL with the address as its host, the `Host` header and the TLS
    server name that keep the original name (nothing changes when the host is an address)."""
    parsed = httpx.URL(url)
    try:
        ipaddress.ip_address(parsed.host)
        return url, {}, {}
    except ValueError:
        pass
    address = f"[{ip}]" if ":" in ip else ip
    host = parsed.host if parsed.port is None else f"{parsed.host}:{parsed.port}"
    extensions = {"sni_hostname": parsed.host} if parsed.scheme == "https" else {}
    return str(parsed.copy_with(host=address)), {"Host": host}, extensions


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
        ips = await check_url(url, policy, resolver)
        target, host, extensions = pinned(url, ips[0])
        spec = RequestSpec(
            url=target, headers={**headers, **host}, follow_redirects=False, extensions=extensions
        )
        response = await runner.request(key, spec, policy.call, calls, accept_types=accept_types)
        location = response.headers.get("location")
        if response.status in REDIRECTS and location:
            url = urljoin(url, location)
            continue
        return response, url
    raise Refused(f"more than {policy.max_redirects} redirects")
