"""The network guard and bounded redirects, for every fetch of a URL that a search result gave.

A search result is an untrusted URL: fetching it must not reach into the network the worker
runs in (cloud metadata at 169.254.169.254, private services, localhost). Every hop's host is
resolved and each of its addresses checked before the request, and redirects are followed one
hop at a time so that a public page cannot bounce the fetcher to a private one.

Only global unicast addresses are fetched (`ipaddress`'s `is_global`: not private, loopback,
link-local, shared 100.64.0.0/10, reserved, documentation or benchmarking space), unless a
deployment allows private or loopback ones; the cloud metadata services are refused by name and
by number whatever it allows, and so are multicast groups and the broadcast address
(`not_unicast`), which `is_global` lets through, as it does deprecated IPv6 site-local space
(fec0::/10, refused as private). The request then goes to the address that was checked, not to
the name: `pinned` puts the address in the URL and keeps the name in `Host` and in TLS (SNI and
certificate checks), so a second DNS answer (rebinding) cannot send it elsewhere.

An IPv6 address can carry an IPv4 one, and `is_global` does not look inside: in Python 3.11
`64:ff9b::a9fe:a9fe` (NAT64 of 169.254.169.254), `2002:a01:203::1` (6to4 of 10.1.2.3) and
`::7f00:1` (IPv4-compatible 127.0.0.1) are all "global", and which of those prefixes count as
global has changed from one Python release to the next. So the transition forms are decoded here,
explicitly (`carried_ipv4`), and the IPv4 they lead to is judged by the same rules as if it had
been resolved itself: IPv4-mapped `::ffff:a.b.c.d` and IPv4-translated `::ffff:0:a.b.c.d`, NAT64's
well-known `64:ff9b::/96` and local-use `64:ff9b:1::/48` (RFC 6052, RFC 8215), 6to4 `2002::/16`,
Teredo `2001::/32` (its server and its client, whose address is stored inverted) and the
deprecated IPv4-compatible `::a.b.c.d`. A form is then fetched only if the form itself is
reachable from the Internet: the mapped form is the IPv4 address itself to a dual-stack socket and
the well-known NAT64 prefix is global (IANA's special-purpose registry); the others are refused as
non-global unless private addresses are allowed (64:ff9b:1::/48 is local by definition; 6to4 and
Teredo are "N/A" in the registry and deprecated or relayed, and later Pythons' ipaddress (since
the fix of CPython gh-113171) calls them non-global too; the translated and compatible forms are
in reserved space nothing routes). Whatever the deployment allows, a metadata IPv4 in any of these
forms is refused as cloud metadata.
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

from fanfuse.net.policy import FetchPolicy
from fanfuse.net.runner import RequestSpec, Response, Runner
from fanfuse.wire.errors import Refused
from fanfuse.wire.models import CallRecord

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


async def system_resolver(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


@dataclass(frozen=True)
class Carried:
    """The IPv4 addresses an IPv6 transition form leads to (`carried_ipv4`)."""

    form: str
    ipv4: tuple[ipaddress.IPv4Address, ...]
    reachable: bool
    """Whether the form's own prefix is reachable from the Internet (see the module's doc)."""
    other_readings: tuple[ipaddress.IPv4Address, ...] = ()
    """Where else the IPv4 address may sit (a local-use NAT64 prefix longer than /48 moves it):
    only a metadata address there is a refusal of its own, since the form is non-global anyway
    unless private addresses are allowed, and then metadata is the one thing still refused."""


NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")
NAT64_LOCAL_USE = ipaddress.IPv6Network("64:ff9b:1::/48")
IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
RFC6052_LENGTHS = (96, 64, 56, 48)
"""Where a NAT64 prefix of each length puts the IPv4 address (RFC 6052 section 2.2): the local-use
prefix is /48, and an operator may use it as it is or any longer prefix inside it."""


def _rfc6052_ipv4(addr: ipaddress.IPv6Address, length: int) -> ipaddress.IPv4Address:
    """The IPv4 address behind a NAT64 prefix of `length` bits: bits 64-71 (the "u" octet) are
    skipped, so an address cut by them comes in two pieces."""
    bits = int(addr)
    if length == 96:
        return ipaddress.IPv4Address(bits & 0xFFFFFFFF)
    before_u = 64 - length  # the IPv4 bits that fit between the prefix and the u octet
    high = (bits >> 64) & ((1 << before_u) - 1)
    low = (bits >> (56 - (32 - before_u))) & ((1 << (32 - before_u)) - 1)
    return ipaddress.IPv4Address((high << (32 - before_u)) | low)


def carried_ipv4(addr: ipaddress.IPv6Address) -> Carried | None:
    """The IPv4 address(es) `addr` leads to when it is a transition form, else None. Pure."""
    if addr.ipv4_mapped is not None:
        return Carried("IPv4-mapped", (addr.ipv4_mapped,), reachable=True)
    if addr in NAT64_WELL_KNOWN:
        return Carried("NAT64", (_rfc6052_ipv4(addr, 96),), reachable=True)
    if addr in NAT64_LOCAL_USE:
        last, *others = (_rfc6052_ipv4(addr, n) for n in RFC6052_LENGTHS)
        return Carried("local-use NAT64", (last,), reachable=False, other_readings=tuple(others))
    if addr.sixtofour is not None:
        return Carried("6to4", (addr.sixtofour,), reachable=False)
    if addr.teredo is not None:
        return Carried("Teredo", addr.teredo, reachable=False)
    if addr in IPV4_TRANSLATED:
        last_32 = ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
        return Carried("IPv4-translated", (last_32,), reachable=False)
    if addr in IPV4_COMPATIBLE and int(addr) > 1:  # :: and ::1 are not IPv4 addresses
        return Carried("IPv4-compatible", (ipaddress.IPv4Address(int(addr)),), reachable=False)
    return None


def address_problem(ip: str, policy: AddressPolicy) -> str | None:
    """Why `ip` may not be fetched, or None. An IPv6 transition form is judged by the IPv4
    address(es) it leads to, then by whether the form itself is reachable."""
    addr = ipaddress.ip_address(ip.split("%")[0])
    carried = carried_ipv4(addr) if isinstance(addr, ipaddress.IPv6Address) else None
    if carried is None:
        return _own_problem(addr, policy)
    problems = [_own_problem(v4, policy) for v4 in carried.ipv4]
    if "cloud metadata" in problems or any(v4 in METADATA_IPS for v4 in carried.other_readings):
        return "cloud metadata"
    problem = next((p for p in problems if p is not None), None)
    if problem is None and not carried.reachable and not policy.allow_private:
        return "non-global"
    return problem


LIMITED_BROADCAST = ipaddress.IPv4Address("255.255.255.255")


def not_unicast(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """What `addr` is when it names no single host, or None. Pure.

    Multicast (224.0.0.0/4, ff00::/8) and the limited broadcast are groups, never one server: no
    HTTP fetch has any business there, whatever a deployment allows. `ipaddress` calls every
    multicast scope but the reserved ones global in Python 3.11 (`ff02::1`, `ff0e::1`,
    `224.0.0.1`, `239.255.255.250` among them), so this is asked before `is_global`, never
    after it."""
    if addr.is_multicast:
        return "multicast"
    if addr == LIMITED_BROADCAST:
        return "broadcast"
    return None


def _own_problem(
    addr: ipaddress.IPv4Address | ipaddress.IPv6Address, policy: AddressPolicy
) -> str | None:
    """Refusals that hold under every policy first (metadata, groups), then the ranges a
    policy may open (site-local like private), and only then `is_global`, which is a list of
    what IANA calls not globally reachable, not a test that an address is a public host."""
    if addr in METADATA_IPS:
        return "cloud metadata"
    group = not_unicast(addr)
    if group is not None:
        return group
    if isinstance(addr, ipaddress.IPv6Address) and addr.is_site_local and not policy.allow_private:
        return "site-local"  # fec0::/10: deprecated (RFC 3879), private in all but name
    if addr.is_global:
        return None
    if addr.is_loopback:
        return None if policy.allow_loopback or policy.allow_private else "loopback"
    if policy.allow_private:
        return None
    for kind in ("link_local", "private", "reserved", "unspecified"):
        if getattr(addr, f"is_{kind}"):
            return kind.replace("_", "-")
    return "non-global"  # shared address space (100.64.0.0/10) and the like


async def check_url(
    url: str, policy: AddressPolicy, resolver: Resolver = system_resolver
) -> list[str]:
    """The addresses `url`'s host resolves to, or `Refused` unless every one may be fetched
    (a URL that does not parse, or a name that cannot be encoded, is refused too: a result's URL
    is whatever a provider or a page wrote)."""
    try:
        parsed = httpx.URL(url)
        host = parsed.host  # decoded from IDNA on first use: it can fail here too
    except (httpx.InvalidURL, UnicodeError) as exc:
        raise Refused(f"not a URL that can be fetched: {exc}") from exc
    if parsed.scheme not in ("http", "https"):
        raise Refused(f"scheme {parsed.scheme!r} is not fetched")
    if not host:
        raise Refused("no host")
    if host.lower().rstrip(".") in METADATA_HOSTS:
        raise Refused(f"{host} is a cloud metadata service; not fetched")
    try:
        ips = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            ips = await resolver(host, parsed.port or (443 if parsed.scheme == "https" else 80))
        except (OSError, UnicodeError) as exc:  # UnicodeError: a label IDNA cannot encode
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
