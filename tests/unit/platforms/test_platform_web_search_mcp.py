"""`web_search_mcp` against a real MCP server (the SDK's MCPServer) started on stdio."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from fanfuse.errors import ProviderError
from fanfuse.platforms.base import PlatformContext, RunRecord, SearchParams
from fanfuse.platforms.web_search_mcp import WebSearchMcpPlatform, parse_results
from tests.unit.platforms.harness import FIXTURES

pytestmark = pytest.mark.timeout(120)

COMMAND = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'web_search_mcp/server.py'))}"


async def search(queries: list[str], *, content: bool, limit: int = 3, **over: object):
    platform = WebSearchMcpPlatform(overrides={"command": COMMAND, **over})
    record = RunRecord()
    ctx = PlatformContext(settings=platform.load_settings(), record=record)
    params = SearchParams(queries=queries, limit=limit, include_content=content)
    return await platform.search(ctx, params), record


async def test_summaries_without_content() -> None:
    lists, extras = await search(["rust async"], content=False)
    assert [h.url for h in lists[0]][:2] == [
        "https://tokio.rs/",
        "https://rust-lang.github.io/async-book/",
    ]
    assert all(h.content is None for h in lists[0])
    assert extras.calls[0].tool == "get-web-search-summaries"


async def test_full_search_with_targeted_fetches_for_pages_lacking_content() -> None:
    lists, _ = await search(["rust async"], content=True)
    tokio, book, smol = lists[0]
    assert tokio.content == "Tokio is an asynchronous runtime for the Rust programming language."
    assert book.content == "Full text of https://rust-lang.github.io/async-book/."
    assert book.metadata["fetched_by"] == "get-single-web-page-content"
    assert smol.content is None and "could not be fetched" in smol.metadata["fetch_error"]


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
