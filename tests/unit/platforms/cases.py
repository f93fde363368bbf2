"""One entry per HTTP adapter: what `test_http_contract.py` drives through the failure contract."""

from __future__ import annotations

from typing import Any

from fanfuse.platforms.base import Platform

from tests.unit.platforms.harness import AdapterCase, fixture


def _searxng(base: str, **over: Any) -> Platform:
    from fanfuse.platforms.searxng import SearxngPlatform

    return SearxngPlatform(overrides={"base_url": base, **over})


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
]
