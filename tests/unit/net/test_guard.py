"""The SSRF guard's decisions (pure: no request leaves for any of these addresses) and the
pinned connection, against a server on 127.0.0.1 reached through a resolver double."""

from __future__ import annotations

import ipaddress
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.net import guard
from fanfuse.net.guard import address_problem, carried_ipv4, check_url, pinned
from fanfuse.net.policy import FetchPolicy
from fanfuse.net.runner import Runner
from fanfuse.wire.errors import Refused

CLOSED = FetchPolicy()
OPEN = FetchPolicy(allow_private=True, allow_loopback=True)


@pytest.mark.parametrize(
    ("ip", "problem"),
    [
        ("93.184.216.34", None),
        ("2606:4700::1111", None),
        ("100.100.100.200", "cloud metadata"),  # Alibaba's, inside 100.64.0.0/10
        ("169.254.169.254", "cloud metadata"),
        ("::ffff:169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("169.254.170.2", "cloud metadata"),
        ("100.64.0.1", "non-global"),  # shared address space: the hole this closes
        ("10.1.2.3", "private"),
        ("192.168.0.1", "private"),
        ("127.0.0.1", "loopback"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "private"),
    ],
)
def test_only_global_addresses_pass_a_closed_policy(ip: str, problem: str | None) -> None:
    assert address_problem(ip, CLOSED) == problem


# Each IPv4 address written in each IPv6 transition form: (address, form, the IPv4 inside, what a
# closed policy answers). Only strings for the pure decision: nothing connects to any of them.
# Teredo carries a server and an inverted client (8.8.4.4 the other end of each row).
TRANSITION_FORMS = [
    ("::ffff:a01:203", "IPv4-mapped", "10.1.2.3", "private"),
    ("::ffff:7f00:1", "IPv4-mapped", "127.0.0.1", "loopback"),
    ("::ffff:a9fe:a9fe", "IPv4-mapped", "169.254.169.254", "cloud metadata"),
    ("::ffff:c0a8:101", "IPv4-mapped", "192.168.1.1", "private"),
    ("::ffff:6440:1", "IPv4-mapped", "100.64.0.1", "non-global"),
    ("::ffff:808:808", "IPv4-mapped", "8.8.8.8", None),
    ("::a01:203", "IPv4-compatible", "10.1.2.3", "private"),
    ("::7f00:1", "IPv4-compatible", "127.0.0.1", "loopback"),
    ("::a9fe:a9fe", "IPv4-compatible", "169.254.169.254", "cloud metadata"),
    ("::c0a8:101", "IPv4-compatible", "192.168.1.1", "private"),
    ("::6440:1", "IPv4-compatible", "100.64.0.1", "non-global"),
    ("::808:808", "IPv4-compatible", "8.8.8.8", "non-global"),  # deprecated, routed nowhere
    ("::ffff:0:a01:203", "IPv4-translated", "10.1.2.3", "private"),
    ("::ffff:0:7f00:1", "IPv4-translated", "127.0.0.1", "loopback"),
    ("::ffff:0:a9fe:a9fe", "IPv4-translated", "169.254.169.254", "cloud metadata"),
    ("::ffff:0:c0a8:101", "IPv4-translated", "192.168.1.1", "private"),
    ("::ffff:0:6440:1", "IPv4-translated", "100.64.0.1", "non-global"),
    ("::ffff:0:808:808", "IPv4-translated", "8.8.8.8", "non-global"),
    ("64:ff9b::a01:203", "NAT64", "10.1.2.3", "private"),
    ("64:ff9b::7f00:1", "NAT64", "127.0.0.1", "loopback"),
    ("64:ff9b::a9fe:a9fe", "NAT64", "169.254.169.254", "cloud metadata"),
    ("64:ff9b::c0a8:101", "NAT64", "192.168.1.1", "private"),
    ("64:ff9b::6440:1", "NAT64", "100.64.0.1", "non-global"),
    ("64:ff9b::808:808", "NAT64", "8.8.8.8", None),  # the well-known prefix is global
    ("64:ff9b:1::a01:203", "local-use NAT64", "10.1.2.3", "private"),
    ("64:ff9b:1::7f00:1", "local-use NAT64", "127.0.0.1", "loopback"),
    ("64:ff9b:1::a9fe:a9fe", "local-use NAT64", "169.254.169.254", "cloud metadata"),
    ("64:ff9b:1::c0a8:101", "local-use NAT64", "192.168.1.1", "private"),
    ("64:ff9b:1::6440:1", "local-use NAT64", "100.64.0.1", "non-global"),
    ("64:ff9b:1::808:808", "local-use NAT64", "8.8.8.8", "non-global"),  # local by definition
    ("2002:a01:203::1", "6to4", "10.1.2.3", "private"),
    ("2002:7f00:1::1", "6to4", "127.0.0.1", "loopback"),
    ("2002:a9fe:a9fe::1", "6to4", "169.254.169.254", "cloud metadata"),
    ("2002:c0a8:101::1", "6to4", "192.168.1.1", "private"),
    ("2002:6440:1::1", "6to4", "100.64.0.1", "non-global"),
    ("2002:808:808::1", "6to4", "8.8.8.8", "non-global"),  # relayed: not reachable as such
    ("2001:0:808:404:0:ffff:f5fe:fdfc", "Teredo", "10.1.2.3", "private"),
    ("2001:0:808:404:0:ffff:80ff:fffe", "Teredo", "127.0.0.1", "loopback"),
    ("2001:0:808:404:0:ffff:5601:5601", "Teredo", "169.254.169.254", "cloud metadata"),
    ("2001:0:808:404:0:ffff:3f57:fefe", "Teredo", "192.168.1.1", "private"),
    ("2001:0:808:404:0:ffff:9bbf:fffe", "Teredo", "100.64.0.1", "non-global"),
    ("2001:0:808:404:0:ffff:f7f7:f7f7", "Teredo", "8.8.8.8", "non-global"),
    ("2001:0:a01:203:0:ffff:f7f7:fbfb", "Teredo", "10.1.2.3", "private"),  # as the server
    ("2001:0:7f00:1:0:ffff:f7f7:fbfb", "Teredo", "127.0.0.1", "loopback"),
    ("2001:0:a9fe:a9fe:0:ffff:f7f7:fbfb", "Teredo", "169.254.169.254", "cloud metadata"),
    ("2001:0:c0a8:101:0:ffff:f7f7:fbfb", "Teredo", "192.168.1.1", "private"),
    ("2001:0:6440:1:0:ffff:f7f7:fbfb", "Teredo", "100.64.0.1", "non-global"),
    ("2001:0:808:808:0:ffff:f7f7:fbfb", "Teredo", "8.8.8.8", "non-global"),
]


@pytest.mark.parametrize(("ip", "form", "ipv4", "problem"), TRANSITION_FORMS)
def test_an_ipv6_transition_form_is_judged_by_the_ipv4_it_carries(
    ip: str, form: str, ipv4: str, problem: str | None
) -> None:
    carried = carried_ipv4(ipaddress.IPv6Address(ip))
    assert carried is not None and carried.form == form
    assert ipaddress.IPv4Address(ipv4) in carried.ipv4
    assert address_problem(ip, CLOSED) == problem


@pytest.mark.parametrize(("ip", "form", "ipv4", "problem"), TRANSITION_FORMS)
def test_a_policy_that_allows_private_addresses_still_refuses_carried_metadata(
    ip: str, form: str, ipv4: str, problem: str | None
) -> None:
    expected = "cloud metadata" if ipv4 == "169.254.169.254" else None
    assert address_problem(ip, OPEN) == expected


@pytest.mark.parametrize(
    "ip",
    [
        "64:ff9b:1:a9fe:a9:fe00::",  # a /48 NAT64 prefix: the IPv4 around the u octet
        "64:ff9b:1:a9:fe:a9fe::",  # a /56 prefix
        "64:ff9b:1:0:a9:fea9:fe00:0",  # a /64 prefix
        "64:ff9b:1:abcd::a9fe:a9fe",  # a /96 prefix inside the local-use /48
    ],
)
def test_metadata_behind_any_local_use_nat64_prefix_length_is_named(ip: str) -> None:
    assert address_problem(ip, OPEN) == "cloud metadata"
    assert address_problem(ip, CLOSED) == "cloud metadata"


@pytest.mark.parametrize("ip", ["::", "::1", "2606:4700::1111", "fe80::1", "fd00:ec2::254"])
def test_plain_ipv6_addresses_carry_no_ipv4(ip: str) -> None:
    assert carried_ipv4(ipaddress.IPv6Address(ip)) is None


def test_loopback_allowed_is_this_machines_loopback_only_in_the_mapped_form() -> None:
    loopback_only = FetchPolicy(allow_loopback=True)
    assert address_problem("::ffff:127.0.0.1", loopback_only) is None
    assert address_problem("::1", loopback_only) is None
    assert address_problem("2002:7f00:1::1", loopback_only) == "non-global"
    assert address_problem("::7f00:1", loopback_only) == "non-global"


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("64:ff9b::a9fe:a9fe", "cloud metadata"),
        ("2002:a01:203::1", "private"),
        ("::7f00:1", "loopback"),
        ("2001:0:808:404:0:ffff:5601:5601", "cloud metadata"),
        ("64:ff9b:1::6440:1", "non-global"),
    ],
)
async def test_a_name_resolving_to_a_transition_form_is_refused(address: str, problem: str) -> None:
    """The resolver double answers an AAAA-style address; the URL is refused before any fetch."""

    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34", address]

    pattern = rf"resolves to a {problem} address \({re.escape(address)}\)"
    with pytest.raises(Refused, match=pattern):
        await check_url("https://transition.test/", CLOSED, resolver)
    with pytest.raises(Refused, match=pattern):  # written as the URL's host, with no lookup
        await check_url(f"http://[{address}]/", CLOSED, resolver)


async def test_a_name_resolving_to_public_nat64_and_mapped_addresses_passes() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["64:ff9b::808:808", "::ffff:808:808"]

    assert await check_url("https://nat64.test/", CLOSED, resolver) == [
        "64:ff9b::808:808",
        "::ffff:808:808",
    ]


@pytest.mark.parametrize("url", ["http://[::1/", "http://xn--/", "javascript:alert(1)", "ftp://x/"])
async def test_a_url_that_cannot_be_fetched_is_refused_not_raised(url: str) -> None:
    async def resolver(host: str, port: int) -> list[str]:
        raise AssertionError("nothing to resolve")

    with pytest.raises(Refused):
        await check_url(url, OPEN, resolver)


async def test_a_name_the_resolver_cannot_encode_is_refused() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        raise UnicodeError("label too long")  # what the IDNA codec raises for a 64+ label

    with pytest.raises(Refused, match="cannot resolve"):
        await check_url(f"http://{'a' * 70}.test/", OPEN, resolver)


@pytest.mark.parametrize("ip", ["192.0.2.1", "198.18.0.1", "2001:db8::1", "240.0.0.1"])
def test_documentation_benchmark_and_reserved_space_is_refused(ip: str) -> None:
    assert address_problem(ip, CLOSED) is not None


@pytest.mark.parametrize("ip", ["169.254.169.254", "100.100.100.200", "fd00:ec2::254"])
def test_metadata_addresses_are_refused_even_where_private_ones_are_allowed(ip: str) -> None:
    assert address_problem(ip, OPEN) == "cloud metadata"
    assert address_problem("10.0.0.1", OPEN) is None


@pytest.mark.parametrize(
    "url", ["http://metadata.google.internal/computeMetadata/v1/", "http://METADATA./x"]
)
async def test_metadata_names_are_refused_before_any_lookup(url: str) -> None:
    async def resolver(host: str, port: int) -> list[str]:
        raise AssertionError("a metadata name must not even be resolved")

    with pytest.raises(Refused, match="cloud metadata service"):
        await check_url(url, OPEN, resolver)


async def test_a_name_with_one_bad_address_among_good_ones_is_refused() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "100.64.9.9"]

    with pytest.raises(Refused, match=r"non-global address \(100.64.9.9\)"):
        await check_url("https://mixed.test/", CLOSED, resolver)


def test_pinned_keeps_the_name_in_host_and_tls() -> None:
    assert pinned("https://site.test:8443/a?b=1", "93.184.216.34") == (
        "https://93.184.216.34:8443/a?b=1",
        {"Host": "site.test:8443"},
        {"sni_hostname": "site.test"},
    )
    assert pinned("http://site.test/a", "2606:4700::1111") == (
        "http://[2606:4700::1111]/a",
        {"Host": "site.test"},
        {},
    )
    assert pinned("http://127.0.0.1:81/a", "127.0.0.1") == ("http://127.0.0.1:81/a", {}, {})


async def test_the_fetch_goes_to_the_checked_address_not_a_second_lookup(
    server: HTTPServer, runner: Runner
) -> None:
    """`rebind.test` resolves only through the double (to 127.0.0.1). Were the name handed to
    httpx, it would look it up again (and fail, or, with a rebinding DNS, go elsewhere)."""
    lookups: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    seen: list[str] = []

    def page(request: Request) -> Response:
        seen.append(request.headers["Host"])
        return Response("<p>pinned</p>", content_type="text/html")

    server.expect_request("/page").respond_with_handler(page)
    url = f"http://rebind.test:{server.port}/page"
    response, final = await guard.get(runner, "k", url, OPEN, None, resolver=resolver)
    assert (response.status, response.body, final) == (200, b"<p>pinned</p>", url)
    assert seen == [f"rebind.test:{server.port}"] and lookups == ["rebind.test"]


# Issue 29, item 5: `is_global` calls these global in Python 3.11, and the guard asked it first.
GROUPS_AND_SITE_LOCAL = [
    ("ff02::1", "multicast"),  # all nodes, link scope
    ("ff05::2", "multicast"),  # all routers, site scope
    ("ff0e::1", "multicast"),  # global scope
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),  # SSDP
    ("::ffff:239.255.255.250", "multicast"),  # the same group, IPv4-mapped
    ("64:ff9b::e000:1", "multicast"),  # and through the well-known NAT64 prefix
    ("255.255.255.255", "broadcast"),
    ("fec0::1", "site-local"),
]


@pytest.mark.parametrize(("ip", "problem"), GROUPS_AND_SITE_LOCAL)
def test_multicast_broadcast_and_site_local_are_refused_before_the_global_test(
    ip: str, problem: str
) -> None:
    assert address_problem(ip, CLOSED) == problem


@pytest.mark.parametrize(
    "ip", [ip for ip, problem in GROUPS_AND_SITE_LOCAL if problem in ("multicast", "broadcast")]
)
def test_groups_are_refused_whatever_the_policy_allows(ip: str) -> None:
    """A group is never one server: a policy that opens private and loopback space (tests,
    local stacks) still refuses it, while it lets site-local through as private."""
    assert address_problem(ip, OPEN) in ("multicast", "broadcast")
    assert address_problem("fec0::1", OPEN) is None


@given(st.integers(min_value=0, max_value=2**120 - 1), st.integers(0, 2**28 - 1))
def test_every_multicast_address_is_refused(v6_low: int, v4_low: int) -> None:
    """ff00::/8 and 224.0.0.0/4 whole, whatever scope or group: none passes a closed policy
    (hypothesis draws the bits below each prefix)."""
    v6 = ipaddress.IPv6Address((0xFF << 120) | v6_low)
    v4 = ipaddress.IPv4Address((0xE << 28) | v4_low)
    assert address_problem(str(v6), CLOSED) == "multicast"
    assert address_problem(str(v4), CLOSED) == "multicast"
