"""The bounded decoder: one content coding, the same cap on the decoded bytes for every coding.

Before, httpx inflated each chunk without a bound and the cap was checked after: a 2 KB
`gzip, gzip` page held a gigabyte. Here the cap holds while the bytes are produced, whatever
arrives; and the runner sends every body (page or provider answer) through it.
"""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib

import brotli
import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response as WerkzeugResponse

from fanfuse.net import codings
from fanfuse.net.codings import BoundedBody, Undecodable
from fanfuse.net.policy import CallPolicy
from fanfuse.net.runner import RequestSpec, Runner, UndecodableBody
from fanfuse.wire.models import CallRecord
from tests.support.hostile_pages import GIB, brotli_bomb, gzip_bomb, gzip_in_gzip

LIMIT = 10_000
TEXT = bytes(range(256)) * 200  # 51 200 bytes that compress a little


def deflate_raw(data: bytes) -> bytes:
    squeeze = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return squeeze.compress(data) + squeeze.flush()


ENCODE = {
    "": lambda data: data,
    "identity": lambda data: data,
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,  # zlib-wrapped, as the RFC says
    "deflate-raw": deflate_raw,  # what some servers send under `deflate`
    "br": brotli.compress,
}


def header(name: str) -> str:
    return "deflate" if name == "deflate-raw" else name


def read(content_encoding: str, wire: bytes, limit: int = LIMIT, chunk: int = 1000) -> BoundedBody:
    body = BoundedBody(content_encoding, limit)
    for i in range(0, len(wire), chunk):
        if body.feed(wire[i : i + chunk]):
            break
    return body


@pytest.mark.parametrize("name", list(ENCODE))
@pytest.mark.parametrize("chunk", [1, 7, 1000, 1_000_000])
def test_a_body_of_exactly_the_cap_is_whole_and_one_byte_more_is_cut(name: str, chunk: int) -> None:
    for size, truncated in ((LIMIT - 1, False), (LIMIT, False), (LIMIT + 1, True)):
        data = TEXT[:size]
        body = read(header(name), ENCODE[name](data), chunk=chunk)
        assert body.truncated is truncated, (name, size)
        assert body.body == data[:LIMIT]


@pytest.mark.parametrize("name", list(ENCODE))
def test_a_small_body_decodes_whole(name: str) -> None:
    body = read(header(name), ENCODE[name](b"hello, page"))
    assert (body.body, body.truncated) == (b"hello, page", False)


@pytest.mark.parametrize(
    "value",
    ["gzip, gzip", "gzip,br", "deflate, gzip", "br, br", "gzip, identity, deflate", "GZIP, X-GZIP"],
)
def test_stacked_codings_are_refused(value: str) -> None:
    with pytest.raises(Undecodable, match="stacked"):
        read(value, gzip.compress(gzip.compress(b"x")))


@pytest.mark.parametrize("value", ["compress", "zstd", "exi", "pack200-gzip", "nonsense"])
def test_a_coding_not_offered_is_refused(value: str) -> None:
    with pytest.raises(Undecodable, match="is not decoded"):
        read(value, b"\x28\xb5\x2f\xfd whatever")


@pytest.mark.parametrize("value", ["GZIP", " gzip ", "identity, gzip", "gzip, identity"])
def test_one_coding_in_any_spelling_is_read(value: str) -> None:
    assert read(value, gzip.compress(b"page")).body == b"page"


def test_an_empty_body_is_empty_whatever_its_coding_says() -> None:
    """A redirect or a 204 may carry any header: nothing is decoded, nothing refused."""
    body = BoundedBody("gzip, gzip", LIMIT)
    assert body.feed(b"") is False
    assert (body.body, body.truncated) == (b"", False)


@pytest.mark.parametrize("name", ["gzip", "deflate", "br"])
def test_a_corrupt_stream_is_undecodable(name: str) -> None:
    wire = ENCODE[name](TEXT)
    with pytest.raises(Undecodable, match="corrupt"):
        read(name, wire[:10] + bytes(200) + wire[210:])


def test_bytes_after_the_end_of_a_gzip_stream_are_ignored() -> None:
    assert read("gzip", gzip.compress(b"page") + b"trailing junk").body == b"page"


def test_the_offer_is_exactly_what_is_decoded() -> None:
    assert codings.BROTLI  # brotli >= 1.2 is in the `web` extra
    assert codings.ACCEPT_ENCODING == "gzip, deflate, br"
    for coding in codings.CODINGS:
        assert codings.coding_of(coding) == coding


BOMBS = {
    "gzip_in_gzip": ("gzip, gzip", gzip_in_gzip),
    "gzip": ("gzip", gzip_bomb),
    "br": ("br", brotli_bomb),
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_a_gigabyte_bomb_never_holds_more_than_the_cap(name: str) -> None:
    """1 GiB of zeros behind each coding: the decoder allocates about the cap, not the bomb
    (tracemalloc sees every bytes object zlib or brotli returns)."""
    value, make = BOMBS[name]
    wire = make(GIB)
    limit = 1_000_000
    tracemalloc.start()
    try:
        started = time.perf_counter()
        try:
            body = read(value, wire, limit=limit, chunk=65_536)
        except Undecodable:
            assert name == "gzip_in_gzip"
        else:
            assert body.truncated and len(body.body) == limit and not any(body.body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * limit, peak
    assert time.perf_counter() - started < 5.0


# -- through the runner: every body, page or provider answer ---------------------------------


def answer(body: bytes, encoding: str, status: int = 200) -> WerkzeugResponse:
    headers = {"Content-Encoding": encoding} if encoding else {}
    return WerkzeugResponse(body, status=status, headers=headers, content_type="application/json")


async def test_the_runner_offers_and_decodes_one_coding(server: HTTPServer, runner: Runner) -> None:
    server.expect_request("/api").respond_with_response(answer(gzip.compress(b'{"a": 1}'), "gzip"))
    response = await runner.request("p", RequestSpec(url=server.url_for("/api")), CallPolicy())
    assert response.body == b'{"a": 1}' and not response.truncated
    assert server.log[0][0].headers["Accept-Encoding"] == codings.ACCEPT_ENCODING


async def test_the_cap_holds_on_the_decoded_size(server: HTTPServer, runner: Runner) -> None:
    server.expect_request("/api").respond_with_response(answer(gzip_bomb(50_000_000), "gzip"))
    policy = CallPolicy(max_body_bytes=100_000)
    response = await runner.request("p", RequestSpec(url=server.url_for("/api")), policy)
    assert response.truncated and len(response.body) == 100_000


async def test_a_stacked_coding_is_a_provider_error_not_retried(
    server: HTTPServer, runner: Runner
) -> None:
    server.expect_request("/api").respond_with_response(answer(gzip_in_gzip(GIB), "gzip, gzip"))
    calls: list[CallRecord] = []
    with pytest.raises(UndecodableBody, match=r"p: stacked content codings \(gzip, gzip\)"):
        await runner.request("p", RequestSpec(url=server.url_for("/api")), CallPolicy(), calls)
    assert len(server.log) == 1
    assert calls[0].status == 200 and calls[0].error is not None and "stacked" in calls[0].error


async def test_a_redirect_body_is_never_read(server: HTTPServer, runner: Runner) -> None:
    """httpx reads (and inflates) each redirect's body before the next hop; the runner follows
    redirects itself and closes them unread, so a bomb on a 302 costs nothing."""
    bomb = WerkzeugResponse(
        gzip_in_gzip(GIB), status=302, headers={"Location": "/final", "Content-Encoding": "gzip"}
    )
    server.expect_request("/hop").respond_with_response(bomb)
    server.expect_request("/final").respond_with_response(answer(b"{}", ""))
    tracemalloc.start()
    try:
        response = await runner.request("p", RequestSpec(url=server.url_for("/hop")), CallPolicy())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.body == b"{}" and response.url == server.url_for("/final")
    assert peak < 50_000_000, peak
