"""`web_search_mcp` against a real MCP server (the SDK's MCPServer) started on stdio.

Result URLs go through the network guard before the page tool sees them; the guard's lookups go
to a resolver double (names to 127.0.0.1, or to the addresses a test gives), never to DNS."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from fanfuse.net.guard import AddressPolicy, Resolver
from fanfuse.net.policy import FetchPolicy
from fanfuse.platforms import Registry
from fanfuse.platforms.contract import PlatformContext, RunRecord, SearchParams
from fanfuse.platforms.web_search_mcp import WebSearchMcpPlatform, parse_results
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.errors import ProviderError
from fanfuse.wire.models import Hit, PlatformState, TaskStatus
from tests.support.platforms.harness import FIXTURES

pytestmark = pytest.mark.timeout(120)

COMMAND = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'web_search_mcp/server.py'))}"
LOOPBACK = FetchPolicy(allow_loopback=True)
"""The tests' address policy: the resolver double answers 127.0.0.1 for a name it may fetch."""


def resolving(table: dict[str, str] | None = None) -> Resolver:
    """A resolver double: each name to its address in `table`, any other to 127.0.0.1."""

    async def resolver(host: str, port: int) -> list[str]:
        return [(table or {}).get(host, "127.0.0.1")]

    return resolver


def command(log: Path | None) -> str:
    """The fixture server, writing the URLs its page tool is asked for to `log`."""
    return COMMAND if log is None else f"{COMMAND} {shlex.quote(str(log))}"


def asked(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


async def search(
    queries: list[str],
    *,
    content: bool,
    limit: int = 3,
    addresses: AddressPolicy | None = LOOPBACK,
    resolver: Resolver | None = None,
    log: Path | None = None,
    **over: object,
) -> tuple[list[list[Hit]], RunRecord]:
    platform = WebSearchMcpPlatform(overrides={"command": command(log), **over})
    record = RunRecord()
    ctx = PlatformContext(
        settings=platform.load_settings(),
        record=record,
        addresses=addresses,
        resolver=resolver or resolving(),
    )
    params = SearchParams(queries=queries, limit=limit, include_content=content)
    return await platform.search(ctx, params), record


async def no_lookup(host: str, port: int) -> list[str]:
    raise AssertionError(f"{host} looked up, with nothing to fetch")


async def test_summaries_without_content() -> None:
    lists, extras = await search(["rust async"], content=False, resolver=no_lookup)
    assert [h.url for h in lists[0]][:2] == [
        "https://tokio.rs/",
        "https://rust-lang.github.io/async-book/",
    ]
    assert all(h.content is None for h in lists[0])
    assert extras.calls[0].tool == "get-web-search-summaries"


async def test_full_search_with_targeted_fetches_for_pages_lacking_content(
    tmp_path: Path,
) -> None:
    log = tmp_path / "asked"
    lists, _ = await search(["rust async"], content=True, log=log)
    tokio, book, smol = lists[0]
    assert tokio.content == "Tokio is an asynchronous runtime for the Rust programming language."
    assert book.content == "Full text of https://rust-lang.github.io/async-book/."
    assert book.metadata["fetched_by"] == "get-single-web-page-content"
    assert smol.content is None and "could not be fetched" in smol.metadata["fetch_error"]
    assert asked(log) == [book.url, smol.url]


async def test_a_url_the_guard_refuses_is_not_sent_to_the_page_tool(tmp_path: Path) -> None:
    """The book's name resolves to NAT64 of the metadata address, tokio's to a private one: the
    page tool is asked for smol's page alone, tokio's content (which the search tool brought) is
    not passed on, and the search still answers, each refusal on its own result."""
    log = tmp_path / "asked"
    table = {"rust-lang.github.io": "64:ff9b::a9fe:a9fe", "tokio.rs": "10.1.2.3"}
    lists, _ = await search(["rust async"], content=True, resolver=resolving(table), log=log)
    tokio, book, smol = lists[0]
    assert asked(log) == [smol.url]
    assert book.content is None
    assert "cloud metadata address (64:ff9b::a9fe:a9fe)" in book.metadata["fetch_error"]
    assert tokio.content is None
    assert "private address (10.1.2.3)" in tokio.metadata["fetch_error"]
    assert "could not be fetched" in smol.metadata["fetch_error"]


async def test_without_an_address_policy_only_global_addresses_are_fetched(
    tmp_path: Path,
) -> None:
    log = tmp_path / "asked"
    lists, _ = await search(["rust async"], content=True, addresses=None, log=log)
    assert asked(log) == []
    assert all(h.content is None for h in lists[0])
    assert all("loopback address (127.0.0.1)" in h.metadata["fetch_error"] for h in lists[0])


async def test_the_embedded_runtime_guards_with_its_content_settings(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Through the whole run path: the deployment allows loopback (its content settings), so the
    page tool gets the 127.0.0.1 page alone, and the platform succeeds. The results' URLs are
    addresses, so the system resolver the runtime uses looks nothing up."""
    monkeypatch.setenv("FANFUSE_CONTENT_ALLOW_LOOPBACK", "true")
    settings = settings.model_copy(update={"content": Settings().content})  # read with the tree
    log = tmp_path / "asked"
    platform = WebSearchMcpPlatform(overrides={"command": command(log)})
    async with EmbeddedRuntime(settings, registry=Registry.of([platform])) as rt:
        view = await rt.search({"query": "addresses", "include_content": True})
    assert view.status is TaskStatus.COMPLETED
    assert [r.state for r in view.platform_runs] == [PlatformState.SUCCEEDED]
    assert asked(log) == ["http://127.0.0.1:9/local"]
    by_url = {r.url: r for r in view.results}
    local = by_url["http://127.0.0.1:9/local"]
    assert local.content == "Full text of http://127.0.0.1:9/local."
    for url, problem in [
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://[64:ff9b::a01:203]/admin", "private"),
        ("http://10.0.0.5/wiki", "private"),
    ]:
        assert by_url[url].content is None
        assert f"a {problem} address" in by_url[url].metadata["fetch_error"]


async def test_a_tool_error_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="search engine unavailable"):
        await search(["explode"], content=True)


async def test_a_server_that_cannot_start_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="web_search_mcp"):
        await search(["q"], content=False, command="/nonexistent/mcp-server")


def test_unconfigured_names_both_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FANFUSE_WEB_SEARCH_MCP_URL", raising=False)
    monkeypatch.delenv("FANFUSE_WEB_SEARCH_MCP_COMMAND", raising=False)
    reason = WebSearchMcpPlatform().availability()
    assert reason == (
        "missing settings: FANFUSE_WEB_SEARCH_MCP_URL or FANFUSE_WEB_SEARCH_MCP_COMMAND"
    )


def test_json_results_are_read_too() -> None:
    item = {"title": "T", "url": "https://a.example/", "description": "d", "fullContent": "c"}
    payload = json.dumps({"results": [item]})
    assert parse_results(payload) == [
        {"title": "T", "url": "https://a.example/", "snippet": "d", "content": "c"}
    ]
