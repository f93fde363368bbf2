"""Shared helpers for the web platform tests: a 127.0.0.1 server, a runner that never sleeps."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_httpserver import HTTPServer

from fanfuse.net.runner import Runner
from fanfuse.platforms.contract import Platform, PlatformContext, RunRecord, SearchParams
from fanfuse.platforms.http_api import H as S
from fanfuse.platforms.http_api import PageToken, ProviderResponse
from fanfuse.wire.models import Hit

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "providers"


def fixture(path: str) -> bytes:
    return (FIXTURES / path).read_bytes()


class Sleeps(list[float]):
    """An injectable `sleep` that records how long the runner wanted to wait."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


def loopback_server() -> HTTPServer:
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    return server


def make_runner(sleeps: Sleeps) -> Runner:
    return Runner(sleep=sleeps, rng=random.Random(7))


async def run_search(
    platform: Platform[Any],
    runner: Runner,
    queries: list[str],
    *,
    limit: int = 10,
    language: str | None = None,
) -> tuple[list[list[Hit]], RunRecord]:
    """Search like the service does; return the hit lists and what the run recorded."""
    record = RunRecord()
    ctx = PlatformContext(settings=platform.load_settings(), runner=runner, record=record)
    lists = await platform.search(
        ctx, SearchParams(queries=queries, limit=limit, language=language)
    )
    return lists, record


def answer(
    params: SearchParams, settings: S, body: bytes, *, page: PageToken = None, status: int = 200
) -> ProviderResponse[S]:
    """A provider's answer to the first page of `params`, as the adapter's parser receives it."""
    return ProviderResponse(
        status=status,
        headers={},
        body=body,
        queries=params.queries,
        page=page,
        params=params,
        settings=settings,
    )


@dataclass
class AdapterCase:
    """How to drive one HTTP adapter through the shared failure contract."""

    id: str
    make: Callable[..., Platform[Any]]
    """(base URL of the 127.0.0.1 server, **setting overrides) -> a configured platform."""
    path: str
    ok: bytes
    empty: bytes
    first_url: str
    content_type: str = "application/json"
    method: str = "GET"
    malformed: bytes = b"<html><body>Service temporarily unavailable</body></html>"
    malformed_type: str = "text/html"
    key_env: str | None = None
    """The env var a 401/403 message must name (None: the provider has no key)."""
    n_ok: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
