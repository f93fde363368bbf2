"""Every HTTP adapter on 127.0.0.1: results, empty, 429, 5xx, timeout, garbage, bad key."""

from __future__ import annotations

import time

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.net.runner import Runner
from fanfuse.wire.errors import ProviderError
from tests.support.platforms.cases import CASES
from tests.support.platforms.harness import AdapterCase, Sleeps, run_search

pytestmark = pytest.mark.timeout(60)


def base(server: HTTPServer) -> str:
    return server.url_for("/").rstrip("/")


def respond(case: AdapterCase, body: bytes, status: int = 200, **headers: str) -> Response:
    return Response(body, status=status, content_type=case.content_type, headers=headers)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_a_page_of_results(case: AdapterCase, server: HTTPServer, runner: Runner) -> None:
    server.expect_request(case.path, method=case.method).respond_with_response(
        respond(case, case.ok)
    )
    lists, info = await run_search(case.make(base(server)), runner, ["rust async runtime"])
    assert len(lists) == 1
    hits = lists[0]
    assert hits and hits[0].url == case.first_url.replace("{base}", base(server))
    if case.n_ok is not None:
        assert len(hits) == case.n_ok
    assert all(h.url.startswith("http") and h.title for h in hits)
    assert info.calls[0].attempts == 1 and info.calls[0].status == 200
    assert server.log[0][0].remote_addr == "127.0.0.1"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_no_results(case: AdapterCase, server: HTTPServer, runner: Runner) -> None:
    server.expect_request(case.path, method=case.method).respond_with_response(
        respond(case, case.empty)
    )
    lists, _ = await run_search(case.make(base(server)), runner, ["zzqx nothing matches"])
    assert lists == [[]]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_429_with_retry_after_then_success(
    case: AdapterCase, server: HTTPServer, runner: Runner, sleeps: Sleeps
) -> None:
    server.expect_ordered_request(case.path, method=case.method).respond_with_response(
        respond(case, b'{"error": "rate limited"}', 429, **{"Retry-After": "2"})
    )
    server.expect_ordered_request(case.path, method=case.method).respond_with_response(
        respond(case, case.ok)
    )
    lists, info = await run_search(case.make(base(server)), runner, ["q"], limit=1)
    assert lists[0][0].url == case.first_url.replace("{base}", base(server))
    assert sleeps[0] == 2.0  # the server's Retry-After, not the backoff
    assert info.calls[0].attempts == 2 and info.calls[0].status == 200


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_500s_until_retries_run_out(
    case: AdapterCase, server: HTTPServer, runner: Runner, sleeps: Sleeps
) -> None:
    server.expect_request(case.path, method=case.method).respond_with_response(
        respond(case, b"upstream exploded", 500)
    )
    with pytest.raises(ProviderError) as err:
        await run_search(case.make(base(server), max_attempts=3), runner, ["q"])
    assert err.value.platform == case.make("http://x").name
    assert "HTTP 500" in err.value.message and "3 attempt(s)" in err.value.message
    assert len(server.log) == 3
    # 0.5 s x 2^(n-1) plus up to 50 % jitter
    assert len(sleeps) == 2
    assert 0.5 <= sleeps[0] <= 0.75 and 1.0 <= sleeps[1] <= 1.5


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_a_timeout_is_retried_then_reported(
    case: AdapterCase, server: HTTPServer, runner: Runner
) -> None:
    def slow(request: Request) -> Response:
        time.sleep(0.6)
        return respond(case, case.ok)

    server.expect_request(case.path, method=case.method).respond_with_handler(slow)
    platform = case.make(base(server), timeout=0.2, max_attempts=2)
    started = time.monotonic()
    with pytest.raises(ProviderError) as err:
        await run_search(platform, runner, ["q"])
    assert "timed out after 0.2s" in err.value.message and "2 attempt(s)" in err.value.message
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_a_malformed_body_is_a_clear_error_not_a_retry(
    case: AdapterCase, server: HTTPServer, runner: Runner
) -> None:
    server.expect_request(case.path, method=case.method).respond_with_response(
        Response(case.malformed, status=200, content_type=case.malformed_type)
    )
    with pytest.raises(ProviderError) as err:
        await run_search(case.make(base(server)), runner, ["q"])
    assert "malformed response" in err.value.message
    assert len(server.log) == 1


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_an_invalid_key_is_not_retried(
    case: AdapterCase, status: int, server: HTTPServer, runner: Runner, sleeps: Sleeps
) -> None:
    server.expect_request(case.path, method=case.method).respond_with_response(
        respond(case, b'{"error": {"message": "invalid api key"}}', status)
    )
    with pytest.raises(ProviderError) as err:
        await run_search(case.make(base(server)), runner, ["q"])
    assert f"HTTP {status}" in err.value.message
    if case.key_env:
        assert case.key_env in err.value.message
    assert len(server.log) == 1 and sleeps == []
