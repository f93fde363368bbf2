"""A page that fails for any reason is that result's error, never its platform's failure.

Before, the per-result boundary caught a list of expected errors only: a `UnicodeError` from a
page's `charset=idna` went through it and failed the whole platform run (and counted against the
platform's breaker). Now every exception of one hit's work stays with that hit; only a
cancellation (the run's deadline, a cancel) goes through.
"""

from __future__ import annotations

import asyncio

import pytest

from fanfuse.net.runner import Runner
from fanfuse.wire.errors import NotExtracted, ProviderError
from fanfuse.wire.models import Hit, Stage
from tests.support.platforms import cases
from tests.unit.stages.test_content_stages import stage_run

FAILURES: dict[str, Exception] = {
    "https://a.example/idna": UnicodeError("decoding with 'idna' codec failed"),
    "https://a.example/bug": KeyError("a parser's bug"),
    "https://a.example/extract": RecursionError("maximum recursion depth exceeded"),
    "https://a.example/http": ProviderError("web/fetch", "HTTP 500; gave up after 2 attempt(s)"),
    "https://a.example/empty": NotExtracted("no main text"),
}


async def work(hit: Hit) -> Hit:
    if hit.url in FAILURES:
        raise FAILURES[hit.url]
    return hit.model_copy(update={"content": "the page"})


async def test_every_exception_of_one_page_stays_with_that_page(runner: Runner) -> None:
    run, reporter = stage_run(cases._searxng("http://x"), runner)
    hits = [Hit(url=url) for url in [*FAILURES, "https://a.example/fine"]]
    out = await run.each_hit(
        Stage.FETCHING_CONTENT,
        hits,
        range(len(hits)),
        work,
        concurrency=2,
        errors=(NotExtracted, ProviderError),
        error_key="fetch_error",
        unit=" pages",
        summary=lambda ok, total: f"{ok}/{total} pages ({total - ok} failed)",
    )
    errors = {h.url: h.metadata.get("fetch_error") for h in out}
    assert errors["https://a.example/idna"] == "UnicodeError: decoding with 'idna' codec failed"
    assert errors["https://a.example/bug"] == 'KeyError: "a parser\'s bug"'
    assert (errors["https://a.example/extract"] or "").startswith("RecursionError: ")
    assert errors["https://a.example/empty"] == "no main text"  # expected errors: as they are
    assert errors["https://a.example/http"] == "web/fetch: HTTP 500; gave up after 2 attempt(s)"
    assert errors["https://a.example/fine"] is None and out[-1].content == "the page"
    assert reporter.details[-1] == "1/6 pages (5 failed)"


async def test_a_cancellation_still_ends_the_stage(runner: Runner) -> None:
    run, _ = stage_run(cases._searxng("http://x"), runner)

    async def cancelled(hit: Hit) -> Hit:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await run.each_hit(
            Stage.RESOLVING,
            [Hit(url="https://a.example/")],
            [0],
            cancelled,
            concurrency=1,
            errors=(),
            error_key="resolve_error",
            unit="",
            summary=lambda ok, total: "",
        )
