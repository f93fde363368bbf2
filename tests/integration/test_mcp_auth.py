"""`fanfuse mcp --http` with authentication on, end to end, on 127.0.0.1 only.

A bind to anything but loopback turns authentication on (`agent.access.authenticates`, tested
with a table in tests/unit/fronts/test_mcp_access.py); tests may not bind such an address, so the
server here binds 127.0.0.1 with `--require-auth`, the same switch: without a credential it
answers 401, with a key made by `fanfuse keys create` in its database the SDK's own client
works, a foreign Host is refused by the SDK's DNS-rebinding check, and one key's searches do not
exist for another key.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from fanfuse.auth.keys import API_KEY_HEADER
from tests.support.mcp_harness import (
    ACCEPT,
    INITIALIZE,
    child_env,
    embedded_env,
    http_server,
    structured,
    text,
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return embedded_env(tmp_path)


def new_key(env: dict[str, str], owner: str) -> str:
    """`fanfuse keys create --owner OWNER` against the server's SQLite database."""
    done = subprocess.run(
        [sys.executable, "-m", "fanfuse.cli.main", "keys", "create", "--owner", owner],
        env=child_env(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def served(env: dict[str, str]) -> Iterator[str]:
    with http_server(env, "--require-auth") as url:
        yield url


def as_key(url: str, key: str) -> Client:
    http = httpx2.AsyncClient(headers={API_KEY_HEADER: key}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=30)


def test_without_a_credential_every_request_is_401(served: str) -> None:
    for headers in ({}, {API_KEY_HEADER: "ff_0123456789abcdef_" + "x" * 43}):
        answer = httpx.post(served, json=INITIALIZE, headers={**ACCEPT, **headers})
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"] == "unauthorized"
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    garbage = {"Authorization": "Bearer " + "[" * 1500}
    answer = httpx.post(served, json=INITIALIZE, headers={**ACCEPT, **garbage})
    assert answer.status_code == 401, answer.text
    assert httpx.get(served, headers=ACCEPT).status_code == 401  # the SSE stream too


def test_a_foreign_host_or_origin_is_refused_even_with_a_key(
    served: str, env: dict[str, str]
) -> None:
    key = {API_KEY_HEADER: new_key(env, "alice"), **ACCEPT}
    port = served.split(":")[2].split("/")[0]
    rebound = httpx.post(served, json=INITIALIZE, headers={**key, "Host": f"evil.example:{port}"})
    assert rebound.status_code == 421, rebound.text
    page = {**key, "Origin": "http://evil.example"}
    assert httpx.post(served, json=INITIALIZE, headers=page).status_code == 403
    fine = httpx.post(
        served, json=INITIALIZE, headers={**key, "Origin": f"http://localhost:{port}"}
    )
    assert fine.status_code == 200, fine.text


async def test_with_a_key_the_sdk_client_searches_and_one_keys_searches_are_not_anothers(
    served: str, env: dict[str, str]
) -> None:
    alice, bob = new_key(env, "alice"), new_key(env, "bob")
    async with as_key(served, alice) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        result = await c.call_tool("search", {"query": "plasma waves", "platform": "docs"})
        started = structured(await c.call_tool("start_search", {"query": "plasma"}))
    assert {"search", "get_search_status", "cancel_search"} <= names
    digest = structured(result)
    assert digest["status"] == "completed" and digest["queries"][0]["results"]
    ref = {"task_id": started["task_id"]}
    async with as_key(served, bob) as c:
        for tool in ("get_search_status", "cancel_search"):
            refused = await c.call_tool(tool, ref)
            assert refused.is_error and text(refused).startswith("no search with task_id")
    async with as_key(served, alice) as c:
        assert structured(await c.call_tool("get_search_status", ref))["task_id"] == ref["task_id"]


def test_an_authenticating_server_refuses_to_front_a_remote_stack(env: dict[str, str]) -> None:
    """It would lend its --api-key to every client: refused before anything is bound."""
    done = subprocess.run(
        [sys.executable, "-m", "fanfuse.cli.main", "mcp", "--http", "--port", "0", "--require-auth",
         "--endpoint", "http://127.0.0.1:9/start_search"],
        env=child_env(env), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "cannot front --endpoint" in done.stderr and "url " not in done.stdout
