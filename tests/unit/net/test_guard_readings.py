"""The guard's readings of hostile addresses, and the system resolver's answer.

A resolver answer is whatever a DNS server controlled by a page's owner says: an IPv6 address
with reserved bits set, a Teredo address pairing two IPv4 addresses. Found by mutation testing
(`scripts/mutants guard`, docs/mutants.md): each test names the mutants it kills. Nothing here
connects anywhere; the system resolver is asked only for address literals, which need no lookup.
"""

from __future__ import annotations

import ipaddress

from fanfuse.net.guard import address_problem, carried_ipv4, system_resolver
from fanfuse.net.policy import FetchPolicy

CLOSED = FetchPolicy()
PRIVATE_OK = FetchPolicy(allow_private=True)


def test_metadata_carried_by_teredo_is_named_whatever_the_other_address_is() -> None:
    """Teredo pairs a server (here private, 10.0.0.1) with a client stored inverted (here
    169.254.169.254): the refusal is the metadata one, the refusal that holds under every
    policy. Kills the "cloud metadata" test of `address_problem` misspelt (the first problem
    found would be named instead)."""
    teredo = "2001:0:a00:1::5601:5601"
    carried = carried_ipv4(ipaddress.IPv6Address(teredo))
    assert carried is not None and carried.form == "Teredo"
    assert [str(v4) for v4 in carried.ipv4] == ["10.0.0.1", "169.254.169.254"]
    assert address_problem(teredo, CLOSED) == "cloud metadata"
    assert address_problem(teredo, PRIVATE_OK) == "cloud metadata"


def test_teredo_is_not_reachable_from_the_internet() -> None:
    """Teredo between two public IPv4 addresses (8.8.8.8 and 1.1.1.1) is still relayed, not
    routed: non-global unless private addresses are allowed. Kills Teredo's `reachable=False`
    -> None."""
    teredo = "2001:0:808:808::fefe:fefe"
    carried = carried_ipv4(ipaddress.IPv6Address(teredo))
    assert carried is not None and carried.reachable is False
    assert [str(v4) for v4 in carried.ipv4] == ["8.8.8.8", "1.1.1.1"]
    assert address_problem(teredo, CLOSED) == "non-global"
    assert address_problem(teredo, PRIVATE_OK) is None


def test_a_local_use_nat64_reading_ignores_the_reserved_u_octet() -> None:
    """RFC 6052 reserves bits 64-71 (the "u" octet) and says they are zero; a hostile answer
    sets them. Behind a /64 prefix, 64:ff9b:1:0:1a9:fea9:fe00:0 carries 169.254.169.254 with u
    = 1: still metadata, and never an exception (the answer must be refused, not crash the
    fetch). Kills the mask of the IPv4 bits after the u octet widened by one bit."""
    assert address_problem("64:ff9b:1:0:1a9:fea9:fe00:0", PRIVATE_OK) == "cloud metadata"
    assert address_problem("64:ff9b:1:0:ffa9:fea9:fe00:0", PRIVATE_OK) == "cloud metadata"


def test_only_metadata_itself_is_refused_behind_a_local_use_nat64_prefix() -> None:
    """Behind a /48 prefix, 64:ff9b:1:a9fe:a9:fe00:: carries 169.254.169.254 and is refused
    where private addresses are allowed; its neighbour 169.254.169.255 is link-local space the
    policy opens. Kills the mask of the IPv4 bits after the u octet losing its lowest bit."""
    assert address_problem("64:ff9b:1:a9fe:a9:fe00::", PRIVATE_OK) == "cloud metadata"
    assert address_problem("64:ff9b:1:a9fe:a9:ff00::", PRIVATE_OK) is None


async def test_the_system_resolver_answers_each_address_once_as_text() -> None:
    """getaddrinfo answers once per socket type and family; the guard wants the addresses, each
    once. Kills the loop, the lookup or its result lost, the host or the type not passed, and
    the wrong field of the answer read (sockaddr[0] is the address, [1] the port)."""
    assert await system_resolver("127.0.0.1", 80) == ["127.0.0.1"]
    assert await system_resolver("::1", 443) == ["::1"]
