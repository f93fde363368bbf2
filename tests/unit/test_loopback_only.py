"""No test sends a packet off this machine: the guards are live, and loopback still works.

pyproject's addopts run pytest-socket with `--allow-hosts=127.0.0.0/8,::1,localhost`: its
guard replaces `socket.socket.connect`, compares the address's host (as given, never resolved)
with the list, and refuses anything else by raising before the real connect is called, so a
refused connect sends nothing. tests/support/loopback.py keeps that guard on through the fixtures'
teardown and refuses to look up a name a DNS server would have to answer. Each test that
tries an outside address or name first checks that the guard is in place, so a broken
configuration fails here without sending anything either.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pytest_socket import SocketConnectBlockedError

from tests.support.loopback import UNGUARDED_CONNECT, UNGUARDED_LOOKUP, LookupBlockedError

pytestmark = [
    pytest.mark.filterwarnings("ignore:A test tried to use socket"),
    pytest.mark.filterwarnings("ignore:a test tried to look up"),
]

OUTSIDE = "192.0.2.1"
"""TEST-NET-1 (RFC 5737): for documentation, routed nowhere; and the guard refuses it first."""


def require_guard() -> None:
    assert socket.socket.connect is not UNGUARDED_CONNECT, "pytest-socket's guard is off"
    assert socket.getaddrinfo is not UNGUARDED_LOOKUP, "the lookup guard is off"


def test_a_connect_off_loopback_fails_inside_the_suite() -> None:
    require_guard()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)  # a real connect would raise BlockingIOError (in progress)
    with pytest.raises(SocketConnectBlockedError, match=OUTSIDE):
        sock.connect((OUTSIDE, 9))
    assert sock.fileno() == -1  # closed by the guard: nothing can follow


def test_a_host_name_is_refused_by_name_without_being_resolved() -> None:
    """The guard compares strings: a name not on the list is refused before any lookup."""
    require_guard()
    with socket.socket() as sock, pytest.raises(SocketConnectBlockedError, match="fanfuse"):
        sock.connect(("fanfuse.invalid", 80))


@pytest.mark.parametrize("name", ["fanfuse.invalid", b"example.invalid", "localhost.invalid"])
def test_a_name_a_dns_server_would_answer_is_not_looked_up(name: str | bytes) -> None:
    require_guard()
    with pytest.raises(LookupBlockedError, match="invalid"):
        socket.getaddrinfo(name, 80)


async def test_nor_through_the_event_loop() -> None:
    require_guard()
    with pytest.raises(LookupBlockedError):
        await asyncio.get_running_loop().getaddrinfo("fanfuse.invalid", 80)


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST", "127.0.0.1", "::1", "192.0.2.1", None])
def test_addresses_and_localhost_are_looked_up_without_a_dns_server(host: str | None) -> None:
    assert socket.getaddrinfo(host, 80, type=socket.SOCK_STREAM)


async def test_an_http_client_off_loopback_fails_inside_the_suite() -> None:
    require_guard()
    async with httpx.AsyncClient() as client:
        # anyio's happy eyeballs may wrap it in an exception group
        refused = pytest.RaisesExc(SocketConnectBlockedError, match=OUTSIDE)
        with pytest.RaisesGroup(refused, allow_unwrapped=True, flatten_subgroups=True):
            await client.get(f"http://{OUTSIDE}:9/")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "127.0.0.2"])
def test_loopback_by_address_or_name_is_allowed(host: str) -> None:
    bind = "127.0.0.1" if host == "localhost" else host
    with socket.create_server((bind, 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection((host, port), timeout=5):
            conn, _ = server.accept()
            conn.close()


def test_ipv6_loopback_is_allowed() -> None:
    # CI's machines have ::1; a machine without it fails here rather than hide the gap.
    server = socket.create_server(("::1", 0), family=socket.AF_INET6)
    with server, socket.create_connection(("::1", server.getsockname()[1]), timeout=5):
        server.accept()[0].close()


def test_unix_sockets_socketpairs_and_the_event_loop_keep_working(tmp_path: Path) -> None:
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"x")
        assert right.recv(1) == b"x"
    path = str(tmp_path / "s")
    with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
        server.bind(path)
        server.listen()
        client.connect(path)
        server.accept()[0].close()
    assert asyncio.run(asyncio.sleep(0, "ran")) == "ran"  # its self-pipe is a socketpair


@pytest.fixture
def guarded_teardown() -> Iterator[None]:
    yield
    require_guard()
    with pytest.raises(SocketConnectBlockedError):
        socket.create_connection((OUTSIDE, 9), timeout=0.1)
    with pytest.raises(LookupBlockedError):
        socket.getaddrinfo("fanfuse.invalid", 80)


def test_the_guards_hold_through_a_fixtures_teardown(guarded_teardown: None) -> None:
    """The check is in the fixture's teardown: an error there fails this test."""
    require_guard()
