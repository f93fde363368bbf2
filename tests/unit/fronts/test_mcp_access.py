"""Who may use `fanfuse mcp --http` (agent/access.py), as pure decisions, and owners enforced
by the embedded backend over a real SQLite runtime.

No test here binds or contacts anything but 127.0.0.1: whether a bind is exposed is a decision
on the host string, tested with a table; the end-to-end check is tests/integration/
test_mcp_auth.py, on 127.0.0.1 with authentication switched on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace

import pytest
from starlette.testclient import TestClient

from fanfuse.auth import keys
from fanfuse.auth.callers import Authenticator
from fanfuse.auth.keys import API_KEY_HEADER
from fanfuse.fronts.mcp.access import (
    CALLER_KEY,
    LOCAL_CALLER,
    authenticates,
    caller_of,
    is_loopback,
    served_names,
    transport_security,
)
from fanfuse.fronts.mcp.transports import build_server, http_app
from fanfuse.http.backend import EmbeddedBackend
from fanfuse.platforms import Registry
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.errors import TaskNotFound, Unauthorized
from fanfuse.wire.models import Caller, TaskStatus, utcnow
from tests.support.fakes import FakePlatform
from tests.support.mcp_harness import ACCEPT, INITIALIZE
from tests.support.optional import present


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),  # all of 127.0.0.0/8
        ("127.255.255.254", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),  # IPv4-mapped loopback
        ("0.0.0.0", False),  # every interface
        ("::", False),
        ("[::]", False),
        ("", False),
        ("192.168.1.10", False),
        ("10.0.0.1", False),
        ("169.254.169.254", False),
        ("::ffff:10.0.0.1", False),
        ("fe80::1", False),
        ("my-host.local", False),  # a name: what it resolves to is not known here
        ("localhost.example.com", False),
        ("127.0.0.1.nip.io", False),
    ],
)
def test_only_a_loopback_bind_may_go_without_authentication(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    assert authenticates(host, require_auth=False) is not loopback
    assert authenticates(host, require_auth=True)  # asked for: always


def test_the_served_names_are_loopbacks_the_bound_host_and_the_configured_ones() -> None:
    assert served_names("127.0.0.1", []) == ["127.0.0.1", "localhost", "[::1]"]
    assert served_names("0.0.0.0", ["MCP.example.com"]) == [
        "127.0.0.1",
        "localhost",
        "[::1]",
        "mcp.example.com",
    ]
    assert served_names("10.1.2.3", []) == ["127.0.0.1", "localhost", "[::1]", "10.1.2.3"]
    assert served_names("::", ["fd00::5"])[-1] == "[fd00::5]"


def test_dns_rebinding_protection_is_on_for_every_bind() -> None:
    for host in ("127.0.0.1", "0.0.0.0", "10.1.2.3", "example.internal"):
        security = transport_security(host, ["mcp.example.com"])
        assert security.enable_dns_rebinding_protection
        assert "mcp.example.com" in security.allowed_hosts
        assert "mcp.example.com:*" in security.allowed_hosts
        assert "https://mcp.example.com" in security.allowed_origins
        assert "evil.example:*" not in security.allowed_hosts
    assert "0.0.0.0:*" not in transport_security("0.0.0.0", []).allowed_hosts


ALICE = Caller(subject="key:alice", via="api_key")
BOB = Caller(subject="firebase:alice", via="id_token")  # the same name, another namespace


def test_a_tool_call_acts_for_the_gates_caller_or_the_local_user_where_none_is_required() -> None:
    verified = SimpleNamespace(scope={CALLER_KEY: ALICE})
    assert caller_of(verified, gated=True) == ALICE
    assert caller_of(None, gated=False) == LOCAL_CALLER  # stdio
    assert caller_of(SimpleNamespace(scope={}), gated=False) == LOCAL_CALLER
    for missing in (None, SimpleNamespace(scope={}), SimpleNamespace(scope={CALLER_KEY: "x"})):
        with pytest.raises(Unauthorized):
            caller_of(missing, gated=True)  # behind the gate: never the local user


@pytest.fixture
async def backend(settings: Settings) -> AsyncIterator[EmbeddedBackend]:
    """A runtime whose one platform takes 5 s: its searches are running while the test looks."""
    slow = Registry.of([FakePlatform("docs", delay=5.0)])
    async with EmbeddedRuntime(settings, registry=slow) as runtime:
        yield EmbeddedBackend(runtime)


async def test_the_embedded_backend_shows_and_cancels_only_the_callers_own_searches(
    backend: EmbeddedBackend,
) -> None:
    """The search of `key:alice` does not exist for `firebase:alice` nor the local user: not
    read, not cancelled (404 as the API answers, so its id is not disclosed)."""
    payload = {"query": "plasma", "platform": "docs", "timeout_s": 30}
    mine = await backend.start(payload, ALICE)
    service = backend.runtime.service
    assert present(service.store.get_task(mine.task_id)).owner == "key:alice"
    for stranger in (BOB, LOCAL_CALLER):
        with pytest.raises(TaskNotFound):
            await backend.status(mine.task_id, stranger)
        with pytest.raises(TaskNotFound):
            await backend.cancel(mine.task_id, stranger)
    assert (await backend.status(mine.task_id, ALICE)).task_id == mine.task_id
    assert service.status(mine.task_id).status is not TaskStatus.CANCELLED
    local = await backend.start(payload, LOCAL_CALLER)  # stdio's user: owner local:mcp
    assert present(service.store.get_task(local.task_id)).owner == "local:mcp"
    with pytest.raises(TaskNotFound):
        await backend.status(local.task_id, ALICE)
    assert (await backend.cancel(local.task_id, LOCAL_CALLER)).status is TaskStatus.CANCELLED
    ownerless = service.start(payload)  # the embedded CLI's: everyone's, as before
    assert (await backend.status(ownerless.task_id, LOCAL_CALLER)).task_id == ownerless.task_id


def test_the_app_for_a_non_loopback_bind_answers_401_without_a_key(
    backend: EmbeddedBackend, settings: Settings
) -> None:
    """The app `fanfuse mcp --http --host 0.0.0.0` serves, driven in process (no socket is
    bound): 401 without a credential, 421 for a foreign Host even with a key, 200 with one."""
    assert authenticates("0.0.0.0", require_auth=False)
    store = backend.runtime.service.store
    app = http_app(
        build_server(backend, 10.0, gated=True), "0.0.0.0", [], Authenticator(settings, store)
    )
    plaintext, record = keys.new_key("alice", "", None, None, utcnow())
    store.put_key(record)
    key = {API_KEY_HEADER: plaintext, **ACCEPT}
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        bare = client.post("/mcp", json=INITIALIZE, headers=ACCEPT)
        assert bare.status_code == 401 and bare.json()["error"] == "unauthorized"
        foreign = client.post("/mcp", json=INITIALIZE, headers={**key, "Host": "evil.example"})
        assert foreign.status_code == 421
        assert client.post("/mcp", json=INITIALIZE, headers=key).status_code == 200


def test_an_mcp_session_belongs_to_the_caller_that_opened_it(
    backend: EmbeddedBackend, settings: Settings
) -> None:
    store = backend.runtime.service.store
    server = build_server(backend, 10.0, gated=True)
    app = http_app(server, "0.0.0.0", [], Authenticator(settings, store))
    credentials = {}
    for owner in ("alice", "bob"):
        plaintext, record = keys.new_key(owner, "", None, None, utcnow())
        store.put_key(record)
        credentials[owner] = {API_KEY_HEADER: plaintext, **ACCEPT}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        opened = client.post("/mcp", json=INITIALIZE, headers=credentials["alice"])
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
        theirs = client.post("/mcp", json=listing, headers={**credentials["bob"], **session})
        assert theirs.status_code == 404 and theirs.json()["message"] == "no such MCP session"
        assert client.delete("/mcp", headers={**credentials["bob"], **session}).status_code == 404
        mine = client.post("/mcp", json=listing, headers={**credentials["alice"], **session})
        assert mine.status_code == 200, mine.text
