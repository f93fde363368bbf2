"""Claims of net/guard.py that its other tests left unasserted, each with the mutant it kills.

Found by mutation testing (`scripts/mutants guard`, docs/mutants.md) on the guard as it stood
before issue 29's boundary work; nothing here connects anywhere: the resolver is a double.
"""

from __future__ import annotations

import ipaddress

import pytest

from fanfuse.net.guard import address_problem, carried_ipv4, check_url
from fanfuse.net.policy import FetchPolicy
from fanfuse.wire.errors import Refused

CLOSED = FetchPolicy()
PRIVATE_OK = FetchPolicy(allow_private=True)


class Asked:
    """A resolver double that records the (host, port) it is asked and answers `ips`."""

    def __init__(self, *ips: str) -> None:
        self.ips = list(ips)
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        return self.ips


@pytest.mark.parametrize(
    ("url", "port"),
    [
        ("https://example.org/", 443),
        ("http://example.org/", 80),
        ("http://example.org:8080/", 8080),
    ],
)
async def test_a_name_is_resolved_for_the_port_the_fetch_will_use(url: str, port: int) -> None:
    """Kills `check_url`'s port: None, `port and ...`, the scheme test inverted or misspelt, 444
    or 81."""
    resolver = Asked("93.184.216.34")
    assert await check_url(url, CLOSED, resolver) == ["93.184.216.34"]
    assert resolver.asked == [("example.org", port)]


async def test_each_refusal_says_why() -> None:
    """Kills the Refused messages of `check_url` lost or changed (scheme, no host, not a URL, no
    address) and a metadata name's trailing dot no longer stripped."""
    with pytest.raises(Refused, match="scheme 'ftp' is not fetched"):
        await check_url("ftp://example.org/", CLOSED, Asked())
    with pytest.raises(Refused, match=r"^no host$"):
        await check_url("http:///path", CLOSED, Asked())
    with pytest.raises(Refused, match="not a URL that can be fetched"):
        await check_url("http://[::1/", CLOSED, Asked())
    with pytest.raises(Refused, match=r"example\.org resolves to no address"):
        await check_url("https://example.org/", CLOSED, Asked())
    resolver = Asked("93.184.216.34")
    with pytest.raises(Refused, match="cloud metadata service"):
        await check_url("http://metadata.google.internal./", CLOSED, resolver)
    assert resolver.asked == []


async def test_an_address_in_the_url_is_checked_as_written() -> None:
    """Kills `ipaddress.ip_address(host)` -> `ip_address(None)` (the address then looked up)."""
    resolver = Asked("93.184.216.34")
    with pytest.raises(Refused, match=r"resolves to a private address \(10\.0\.0\.1\)"):
        await check_url("http://10.0.0.1/", CLOSED, resolver)
    assert resolver.asked == []


def test_a_zone_id_does_not_hide_the_address() -> None:
    """Kills `ip.split("%")` -> `split(None)` or `split("XX%XX")` (a scoped address refused as
    unparseable, or parsed with its zone)."""
    assert address_problem("fe80::1%eth0", CLOSED) == "link-local"
    assert address_problem("2606:4700::1111%2", CLOSED) is None


@pytest.mark.parametrize(
    ("ip", "form"),
    [
        ("64:ff9b:1::808:808", "local-use NAT64"),
        ("2002:808:808::1", "6to4"),
        ("::ffff:0:808:808", "IPv4-translated"),
        ("::808:808", "IPv4-compatible"),
    ],
)
def test_a_form_not_reachable_from_the_internet_is_refused_unless_private_is_allowed(
    ip: str, form: str
) -> None:
    """A public IPv4 address inside a form whose own prefix is not globally routed. Kills each
    form's `reachable=False` -> None."""
    carried = carried_ipv4(ipaddress.IPv6Address(ip))
    assert carried is not None and carried.form == form and carried.reachable is False
    assert address_problem(ip, CLOSED) == "non-global"
    assert address_problem(ip, PRIVATE_OK) is None


def test_the_first_ipv4_compatible_address_is_one() -> None:
    """`::2` is 0.0.0.2 written the old way; only `::` and `::1` are not. Kills `int(addr) > 1`
    -> `> 2`."""
    carried = carried_ipv4(ipaddress.IPv6Address("::2"))
    assert carried is not None and carried.form == "IPv4-compatible"
    assert carried_ipv4(ipaddress.IPv6Address("::1")) is None
