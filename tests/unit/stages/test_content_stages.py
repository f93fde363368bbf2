"""The content stages' guard, resolving of Sogou links, and LLM compression with its fallback."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from fanfuse.content.fetch import fetch_page
from fanfuse.net import guard
from fanfuse.net.runner import Runner
from fanfuse.platforms.contract import PlatformContext, SearchParams
from fanfuse.settings import Settings
from fanfuse.settings.content import ContentSettings
from fanfuse.stages.compressing import compress
from fanfuse.stages.resolving import resolve
from fanfuse.stages.stage_run import Reporter as StageReporter
from fanfuse.stages.stage_run import StageRun
from fanfuse.wire.errors import Refused
from fanfuse.wire.models import CallRecord, Hit, Stage
from tests.support.platforms import cases
from tests.support.platforms.harness import fixture

pytestmark = pytest.mark.timeout(60)


class Reporter(StageReporter):
    """Records what a stage reports (the real one writes platform documents)."""

    def __init__(self) -> None:  # no store, no run: nothing is written
        self.message = ""
        self.details: list[str] = []

    def enter(self, stage: Stage, detail: str, total: int = 0) -> None:
        self.stage = stage
        self.details.append(detail)

    def step(self, current: int, total: int, detail: str) -> None:
        self.details.append(detail)


def stage_run(platform: Any, runner: Runner) -> tuple[StageRun, Reporter]:
    reporter = Reporter()
    ctx = PlatformContext(settings=platform.load_settings(), runner=runner)
    params = SearchParams(queries=["q"], limit=10, include_content=True)
    run = StageRun(platform, ctx, params, reporter, Settings().content)
    return run, reporter


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/",
        "http://172.16.5.4/admin",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://127.0.0.1:8080/",
        "http://[::1]/",
        "http://[::ffff:10.0.0.1]/",
        "http://[fe80::1]/",
        "http://[fc00::1]/",
        "http://0.0.0.0/",
        "file:///etc/passwd",
    ],
)
async def test_private_loopback_and_link_local_are_refused_by_default(url: str) -> None:
    with pytest.raises(Refused):
        await guard.check_url(url, ContentSettings())


async def test_a_name_resolving_to_a_private_address_is_refused() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.1.2.3"]  # one bad address is enough

    with pytest.raises(Refused, match="private address"):
        await guard.check_url("https://intranet.example.com/", ContentSettings(), resolver)


async def test_settings_can_allow_loopback_or_private() -> None:
    await guard.check_url("http://127.0.0.1/", ContentSettings(allow_loopback=True))
    await guard.check_url("http://10.0.0.1/", ContentSettings(allow_private=True))
    await guard.check_url("https://93.184.216.34/", ContentSettings())  # public: fine
    with pytest.raises(Refused):
        await guard.check_url("http://10.0.0.1/", ContentSettings(allow_loopback=True))


async def test_fetch_refuses_a_private_address_without_sending_anything(runner: Runner) -> None:
    calls: list[CallRecord] = []
    with pytest.raises(Refused, match="private"):
        await fetch_page(runner, "t", "http://10.0.0.1/page", ContentSettings(), calls)
    assert calls == []


async def test_a_redirect_to_a_private_address_is_refused(
    server: HTTPServer, runner: Runner
) -> None:
    server.expect_request("/hop").respond_with_response(
        Response(status=302, headers={"Location": "http://192.168.0.10/secret"})
    )
    with pytest.raises(Refused, match="private"):
        await fetch_page(runner, "t", server.url_for("/hop"), ContentSettings(allow_loopback=True))
    assert len(server.log) == 1


async def test_redirects_are_bounded(server: HTTPServer, runner: Runner) -> None:
    server.expect_request("/loop").respond_with_response(
        Response(status=302, headers={"Location": "/loop"})
    )
    settings = ContentSettings(allow_loopback=True, max_redirects=3)
    with pytest.raises(Refused, match="more than 3 redirects"):
        await fetch_page(runner, "t", server.url_for("/loop"), settings)
    assert len(server.log) == 4


async def test_resolving_turns_sogou_links_into_article_urls(
    server: HTTPServer, runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FANFUSE_CONTENT_ALLOW_LOOPBACK", "true")
    server.expect_request("/link").respond_with_data(
        fixture("weixin/link.html"), content_type="text/html; charset=utf-8"
    )
    server.expect_request("/broken").respond_with_response(Response("gone", status=404))
    platform = cases._weixin(server.url_for("/").rstrip("/"))
    run, reporter = stage_run(platform, runner)
    hits = [
        Hit(title="a", url=server.url_for("/link?url=abc&type=2")),
        Hit(title="b", url="http://169.254.169.254/"),
    ]
    out = await resolve(run, hits)
    assert out[0].url.startswith("https://mp.weixin.qq.com/s?")
    assert out[0].metadata["redirected_from"] == hits[0].url
    assert "cloud metadata" in out[1].metadata["resolve_error"] and out[1].url == hits[1].url
    assert reporter.details[-1] == "1/2 successful (1 failed)"


def completion(text: str) -> str:
    return json.dumps(
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
    )


async def test_long_content_is_compressed_by_the_llm_when_configured(
    server: HTTPServer, runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FANFUSE_CONTENT_LLM_BASE_URL", server.url_for("/v1"))
    monkeypatch.setenv("FANFUSE_CONTENT_LLM_API_KEY", "sk-llm")
    monkeypatch.setenv("FANFUSE_CONTENT_TOKEN_BUDGET", "50")
    server.expect_request("/v1/chat/completions", method="POST").respond_with_data(
        completion("Attention lets each token look at all others."),
        content_type="application/json",
    )
    run, reporter = stage_run(cases._searxng("http://x"), runner)
    long_text = "Attention is useful. " * 100
    out = await compress(run, [Hit(url="https://a.example/", content=long_text),
                               Hit(url="https://b.example/", content="short")])  # fmt: skip
    assert out[0].content == "Attention lets each token look at all others."
    assert out[0].metadata["compressed"] == "llm" and out[0].metadata["original_tokens"] > 50
    assert out[1].content == "short" and "compressed" not in out[1].metadata
    sent = json.loads(server.log[0][0].get_data())
    assert sent["messages"][1]["content"] == long_text
    assert server.log[0][0].headers["Authorization"] == "Bearer sk-llm"
    assert "1 compressed by LLM, 0 truncated" in reporter.details[-1]


async def test_a_failing_llm_falls_back_to_truncation(
    server: HTTPServer, runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FANFUSE_CONTENT_LLM_BASE_URL", server.url_for("/v1"))
    monkeypatch.setenv("FANFUSE_CONTENT_TOKEN_BUDGET", "20")
    server.expect_request("/v1/chat/completions").respond_with_response(Response("", status=500))
    run, _ = stage_run(cases._searxng("http://x"), runner)
    out = await compress(run, [Hit(url="https://a.example/", content="One two three. " * 40)])
    assert out[0].metadata["truncated"] is True and "HTTP 500" in out[0].metadata["compress_error"]
    assert out[0].content is not None and out[0].content.endswith("three.")
    assert out[0].metadata["tokens"] <= 20
