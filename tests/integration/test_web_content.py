"""include_content end to end: two web platforms on 127.0.0.1 plus `docs`, through all stages.

Two named web platforms (a SearXNG instance whose links are redirects, and a Brave instance)
answer from a 127.0.0.1 server whose results link to HTML pages on the same server, to a redirect,
and to the cloud metadata address (refused without sending anything). The embedded runtime runs
searching -> resolving -> fetching_content -> compressing, and the stage messages are the ones of
the design.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from fanfuse.net.runner import Runner
from fanfuse.platforms import Registry
from fanfuse.platforms.brave import BravePlatform
from fanfuse.platforms.contract import Capabilities
from fanfuse.platforms.docs import DocsPlatform
from fanfuse.platforms.searxng import SearxngPlatform
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.models import PlatformState, TaskStatus

pytestmark = pytest.mark.timeout(120)

PARAGRAPH = (
    "The transformer replaces recurrence with attention, so every position of a sequence can "
    "look at every other position in one step. This makes training parallel across the "
    "sequence and shortens the paths along which long-range dependencies are learned. "
)


def article(title: str, paragraphs: int, marker: str) -> str:
    body = "".join(f"<p>{marker} part {i}. {PARAGRAPH}</p>" for i in range(paragraphs))
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body>"
        "<nav><a href='/'>Home</a> | <a href='/about'>About</a> | NAVIGATION-BOILERPLATE</nav>"
        f"<main><article><h1>{title}</h1>{body}</article></main>"
        "<footer>FOOTER-BOILERPLATE Copyright 2024</footer></body></html>"
    )


class RedirectingSearxng(SearxngPlatform):
    """A SearXNG instance whose result links are redirects (like a tracking proxy)."""

    capabilities = Capabilities(resolves_urls=True)


class RecordingStore(SqliteStore):
    """The SQLite store, remembering every progress message written to platform documents."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.messages: list[str] = []

    def patch_run(
        self, task_id: str, name: str, fields: dict[str, Any], *, lease: str | None
    ) -> bool:
        if "message" in fields:
            self.messages.append(fields["message"])
        return super().patch_run(task_id, name, fields, lease=lease)


def serve_web(server: HTTPServer) -> None:
    page = server.url_for
    server.expect_request("/pages/attention.html").respond_with_data(
        article("Attention explained", 4, "ATTENTION"), content_type="text/html; charset=utf-8"
    )
    server.expect_request("/pages/long.html").respond_with_data(
        article("A very long survey", 60, "SURVEY"), content_type="text/html; charset=utf-8"
    )
    server.expect_request("/pages/notes.txt").respond_with_data(
        "Plain text notes about attention. " * 5, content_type="text/plain"
    )
    server.expect_request("/pages/image.png").respond_with_data(
        b"\x89PNG\r\n\x1a\n", content_type="image/png"
    )
    for name in ("attention", "long"):
        server.expect_request(f"/go/{name}").respond_with_response(
            Response(status=302, headers={"Location": page(f"/pages/{name}.html")})
        )
    searx = {
        "query": "attention",
        "results": [
            {"url": page("/go/attention"), "title": "Attention explained", "content": "a"},
            {"url": page("/go/long"), "title": "A very long survey", "content": "b"},
            {"url": "http://169.254.169.254/latest/meta-data/", "title": "metadata", "content": ""},
        ],
    }
    brave = {
        "query": {"original": "attention", "more_results_available": False},
        "web": {
            "results": [
                {"title": "Attention explained", "url": page("/pages/attention.html"),
                 "description": "Attention <strong>explained</strong>"},
                {"title": "Notes", "url": page("/pages/notes.txt"), "description": "notes"},
                {"title": "An image", "url": page("/pages/image.png"), "description": "png"},
            ]
        },
    }  # fmt: skip
    server.expect_request("/a/search").respond_with_data(
        json.dumps(searx), content_type="application/json"
    )
    server.expect_request("/b/res/v1/web/search").respond_with_data(
        json.dumps(brave), content_type="application/json"
    )


async def test_include_content_over_two_web_platforms_and_docs(
    server: HTTPServer,
    runner: Runner,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FANFUSE_CONTENT_ALLOW_LOOPBACK", "true")
    monkeypatch.setenv("FANFUSE_CONTENT_TOKEN_BUDGET", "300")
    monkeypatch.delenv("FANFUSE_CONTENT_LLM_BASE_URL", raising=False)
    settings.content = Settings().content  # the tree reads its sections when it is built
    serve_web(server)
    registry = Registry.of(
        [
            RedirectingSearxng(name="web_a", overrides={"base_url": server.url_for("/a")}),
            BravePlatform(
                name="web_b",
                overrides={"api_key": "t", "base_url": server.url_for("/b/res/v1/web/search")},
            ),
            DocsPlatform(),
        ]
    )
    store = RecordingStore(settings.db_path)
    async with EmbeddedRuntime(settings, registry=registry, store=store, runner=runner) as rt:
        view = await rt.search(
            {
                "query": "attention transformer",
                "platform": ["web_a", "web_b", "docs"],
                "max_results": 5,
                "include_content": True,
            }
        )
    assert view.status is TaskStatus.COMPLETED
    runs = {r.name: r for r in view.platform_runs}
    assert all(r.state is PlatformState.SUCCEEDED for r in runs.values())
    assert [s.value for s in runs["web_a"].stages] == [
        "searching", "resolving", "fetching_content", "compressing"
    ]  # fmt: skip
    assert [s.value for s in runs["docs"].stages] == ["searching", "compressing"]

    messages = store.messages
    assert "Platform 1/3 (web_a): Searching: Found 3 results" in messages
    assert "Platform 1/3 (web_a): Resolving URLs: 2/3 successful (1 failed)" in messages
    assert "Platform 1/3 (web_a): Fetching content: 2/3 pages (1 failed)" in messages
    assert "Platform 2/3 (web_b): Fetching content: 2/3 pages (1 failed)" in messages
    assert any(m.startswith("Platform 1/3 (web_a): Compressing: ") for m in messages)
    assert any(m.startswith("Platform 3/3 (docs): Compressing: ") for m in messages)
    assert view.summary is not None
    assert view.summary.message.startswith("Multi-platform search completed: 3/3 platforms")

    by_url = {r.url: r for r in view.results}
    attention = by_url[server.url_for("/pages/attention.html")]
    assert attention.platforms == ["web_a", "web_b"]  # the redirect resolved, then merged
    assert attention.content is not None and "ATTENTION part 3" in attention.content
    assert "NAVIGATION-BOILERPLATE" not in attention.content
    assert "FOOTER-BOILERPLATE" not in attention.content

    long = by_url[server.url_for("/pages/long.html")]
    assert long.content is not None and long.metadata["truncated"] is True
    assert long.metadata["original_tokens"] > 300 >= long.metadata["tokens"]
    assert long.content.endswith(".")  # cut at a sentence boundary

    notes = by_url[server.url_for("/pages/notes.txt")]
    assert notes.content is not None and notes.content.startswith("Plain text notes")
    hits = {h.url: h for r in runs.values() for h in r.results}
    image = hits[server.url_for("/pages/image.png")]
    assert image.content is None and image.content_id is None
    assert image.metadata["fetch_error"] == "unsupported content type image/png"
    metadata_hit = hits["http://169.254.169.254/latest/meta-data/"]
    assert metadata_hit.content is None
    assert "cloud metadata" in metadata_hit.metadata["fetch_error"]
    assert "cloud metadata" in metadata_hit.metadata["resolve_error"]
    docs_results = [r for r in view.results if r.platform == "docs"]
    assert docs_results and all(r.content for r in docs_results)
    # the fetches were recorded on the platform documents, and no request left 127.0.0.1
    assert any(c.platform == "web_b/fetch" for c in runs["web_b"].calls)
    assert all(req.remote_addr == "127.0.0.1" for req, _ in server.log)
