"""Tests stay on loopback: pytest-socket's guard, held through the teardown, and name lookups.

pyproject's addopts run pytest-socket with `--allow-hosts=127.0.0.0/8,::1,localhost`: it guards
`socket.socket.connect` from a test's setup through its call, and lifts the guard before the
fixtures' finalizers run. It leaves `getaddrinfo` alone in that mode, and looking up a name
that is not in /etc/hosts asks a DNS server, which may be off this machine. tests/conftest.py
imports these two hooks, which close both gaps (docs/security.md, "Tests stay on loopback").
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import warnings
from collections.abc import Generator
from typing import Any

import pytest

UNGUARDED_CONNECT = socket.socket.connect
UNGUARDED_LOOKUP = socket.getaddrinfo
LOCAL_NAMES = frozenset({"localhost"})
"""The names a test may look up: /etc/hosts answers them, no DNS server is asked."""


class LookupBlockedError(RuntimeError):
    """A test looked up a name that only a DNS server could answer. A warning too, as
    pytest-socket's errors are, in case the code under test swallows the error."""

    def __init__(self, name: str) -> None:
        message = f"a test tried to look up {name!r}: only IP addresses and localhost here"
        warnings.warn(message, stacklevel=3)
        super().__init__(message)


def is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%")[0])  # an IPv6 address may carry a zone
    except ValueError:
        return False
    return True


def loopback_lookup(host: bytes | str | None, *args: Any, **kwargs: Any) -> Any:
    """`socket.getaddrinfo` for what needs no DNS server: no host (a wildcard bind), an IP
    address, or a local name; anything else raises before the real lookup is called."""
    name = host.decode() if isinstance(host, bytes) else host
    if name is not None and name.lower() not in LOCAL_NAMES and not is_literal(name):
        raise LookupBlockedError(name)
    return UNGUARDED_LOOKUP(host, *args, **kwargs)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """Guard lookups from here; and once pytest-socket has guarded `connect` and the fixtures
    are set up, add a finalizer that puts that same guard back: finalizers run last-in
    first-out, so it runs before every fixture's teardown, the session's and module's too."""
    socket.getaddrinfo = loopback_lookup
    yield
    guard = socket.socket.connect
    if guard is not UNGUARDED_CONNECT:
        item.addfinalizer(functools.partial(setattr, socket.socket, "connect", guard))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    """Lift both guards once the teardown is over, as pytest-socket would have."""
    try:
        yield
    finally:
        # putting the guarded method back is the point (typeshed forbids assigning methods)
        socket.socket.connect = UNGUARDED_CONNECT  # type: ignore[method-assign]
        socket.getaddrinfo = UNGUARDED_LOOKUP
