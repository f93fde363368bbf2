"""One entry per HTTP adapter: what `test_http_contract.py` drives through the failure contract."""

from __future__ import annotations

from typing import Any

from fanfuse.platforms.contract import Platform
from tests.support.platforms.harness import AdapterCase, fixture


def _searxng(base: str, **over: Any) -> Platform[Any]:
    from fanfuse.platforms.searxng import SearxngPlatform

    return SearxngPlatform(overrides={"base_url": base, **over})


def _google(base: str, **over: Any) -> Platform[Any]:
    from fanfuse.platforms.google import GooglePlatform

    settings = {"api_key": "test-key", "cx": "test-cx", "base_url": f"{base}/customsearch/v1"}
    return GooglePlatform(overrides={**settings, **over})


def _perplexity(base: str, **over: Any) -> Platform[Any]:
    from fanfuse.platforms.perplexity import PerplexityPlatform

    return PerplexityPlatform(overrides={"api_key": "pplx-test", "base_url": base, **over})


def _tavily(base: str, **over: Any) -> Platform[Any]:
    from fanfuse.platforms.tavily import TavilyPlatform

    return TavilyPlatform(overrides={"api_key": "tvly-test", "base_url": base, **over})


def _brave(base: str, **over: Any) -> Platform[Any]:
    from fanfuse.platforms.brave import BravePlatform

    settings = {"api_key": "brave-test", "base_url": f"{base}/res/v1/web/search"}
    return BravePlatform(overrides={**settings, **over})


def _linkup(base: str, **over: Any) -> Platform[Any]:
    from fanfuse.platforms.linkup import LinkupPlatform

    return LinkupPlatform(overrides={"api_key": "lk-test", "base_url": f"{base}/v1", **over})


def _exa(base: str, **over: Any) -> Platform[Any]:
    from fanfuse.platforms.exa import ExaPlatform

    return ExaPlatform(overrides={"api_key": "exa-test", "base_url": base, **over})


def _sec_edgar(base: str, **over: Any) -> Platform[Any]:
    from fanfuse.platforms.sec_edgar import SecEdgarPlatform

    settings = {
        "user_agent": "fanfuse tests tests@example.com",
        "base_url": f"{base}/LATEST/search-index",
        "min_interval": 0.0,
    }
    return SecEdgarPlatform(overrides={**settings, **over})


def _arxiv(base: str, **over: Any) -> Platform[Any]:
    from fanfuse.platforms.arxiv import ArxivPlatform

    settings = {"base_url": f"{base}/api/query", "min_interval": 0.0, "enabled": True}
    return ArxivPlatform(overrides={**settings, **over})


def _wikipedia(base: str, **over: Any) -> Platform[Any]:
    from fanfuse.platforms.wikipedia import WikipediaPlatform

    settings = {"base_url": f"{base}/w/api.php", "user_agent": "fanfuse-tests (t@example.com)"}
    return WikipediaPlatform(overrides={**settings, **over})


def _weixin(base: str, **over: Any) -> Platform[Any]:
    from fanfuse.platforms.weixin import WeixinPlatform

    settings = {"enabled": True, "base_url": f"{base}/weixin", "min_interval": 0.0}
    return WeixinPlatform(overrides={**settings, **over})


def _builtin(base: str, **over: Any) -> Platform[Any]:
    from fanfuse.platforms.builtin import BuiltinPlatform

    settings = {"api_key": "sk-test", "base_url": f"{base}/compatible-mode/v1"}
    return BuiltinPlatform(overrides={**settings, **over})


CASES: list[AdapterCase] = [
    AdapterCase(
        id="searxng",
        make=_searxng,
        path="/search",
        ok=fixture("searxng/results.json"),
        empty=fixture("searxng/empty.json"),
        first_url="https://tokio.rs/",
        n_ok=3,
    ),
    AdapterCase(
        id="google",
        make=_google,
        path="/customsearch/v1",
        ok=fixture("google/results.json"),
        empty=fixture("google/empty.json"),
        first_url="https://tokio.rs/",
        n_ok=3,
        key_env="FANFUSE_GOOGLE_API_KEY",
    ),
    AdapterCase(
        id="perplexity",
        make=_perplexity,
        path="/search",
        method="POST",
        ok=fixture("perplexity/results.json"),
        empty=fixture("perplexity/empty.json"),
        first_url="https://tokio.rs/",
        n_ok=3,
        key_env="FANFUSE_PERPLEXITY_API_KEY",
    ),
    AdapterCase(
        id="tavily",
        make=_tavily,
        path="/search",
        method="POST",
        ok=fixture("tavily/results.json"),
        empty=fixture("tavily/empty.json"),
        first_url="https://tokio.rs/",
        n_ok=3,
        key_env="FANFUSE_TAVILY_API_KEY",
    ),
    AdapterCase(
        id="brave",
        make=_brave,
        path="/res/v1/web/search",
        ok=fixture("brave/results.json"),
        empty=fixture("brave/empty.json"),
        first_url="https://tokio.rs/",
        n_ok=3,
        key_env="FANFUSE_BRAVE_API_KEY",
    ),
    AdapterCase(
        id="linkup",
        make=_linkup,
        path="/v1/search",
        method="POST",
        ok=fixture("linkup/results.json"),
        empty=fixture("linkup/empty.json"),
        first_url="https://tokio.rs/",
        n_ok=3,
        key_env="FANFUSE_LINKUP_API_KEY",
    ),
    AdapterCase(
        id="exa",
        make=_exa,
        path="/search",
        method="POST",
        ok=fixture("exa/results.json"),
        empty=fixture("exa/empty.json"),
        first_url="https://tokio.rs/",
        n_ok=3,
        key_env="FANFUSE_EXA_API_KEY",
    ),
    AdapterCase(
        id="sec_edgar",
        make=_sec_edgar,
        path="/LATEST/search-index",
        ok=fixture("sec_edgar/results.json"),
        empty=fixture("sec_edgar/empty.json"),
        first_url="https://www.sec.gov/Archives/edgar/data/320193/000032019324000123/aapl-20240928.htm",
        n_ok=3,
    ),
    AdapterCase(
        id="arxiv",
        make=_arxiv,
        path="/api/query",
        ok=fixture("arxiv/results.xml"),
        empty=fixture("arxiv/empty.xml"),
        content_type="application/atom+xml",
        first_url="http://arxiv.org/abs/1706.03762v7",
        n_ok=2,
    ),
    AdapterCase(
        id="wikipedia",
        make=_wikipedia,
        path="/w/api.php",
        ok=fixture("wikipedia/results.json"),
        empty=fixture("wikipedia/empty.json"),
        first_url="{base}/wiki/Tokio_(software)",
        n_ok=3,
    ),
    AdapterCase(
        id="weixin",
        make=_weixin,
        path="/weixin",
        ok=fixture("weixin/results.html"),
        empty=fixture("weixin/empty.html"),
        content_type="text/html; charset=utf-8",
        first_url="{base}/link?url=dn9a_-gY295K0Rci_xozVXfdMkSQTLW6cwJThYulHEtVjXrGTiVgS2gtVe1CqgTuJlS0&type=2&query=%E6%B3%A8%E6%84%8F%E5%8A%9B&token=A1B2C3",
        n_ok=2,
    ),
    AdapterCase(
        id="builtin",
        make=_builtin,
        path="/compatible-mode/v1/chat/completions",
        method="POST",
        ok=fixture("builtin/qwen.json"),
        empty=fixture("builtin/empty.json"),
        first_url="https://tokio.rs/",
        n_ok=3,
        key_env="FANFUSE_BUILTIN_API_KEY",
    ),
]
