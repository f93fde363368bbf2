"""Issue 29, item 3: a trace header is read with bounded digits, inside each front's error handling.

`X-Cloud-Trace-Context: <32 hex>/<4,400 digits>` made `int()` raise past Python's
`int_max_str_digits`, and the log context was entered outside the error handling: a plain-text 500
on every route of `fanfuse serve` (even `/openapi.json`), and on the functions an exception out of
`start_search`'s wrapper. Here the parser is fuzzed (hypothesis) and every front is sent the
header: serve's routes, the functions' public and task targets (the Lambda's public targets are
these, behind apig-wsgi: tests/aws/test_aws_front.py sends them the header as a function-URL
event), and `fanfuse mcp --http`. A front whose trace parsing fails for any other reason answers
its JSON 503, never a plain 500.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import flask
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.testclient import TestClient

from fanfuse.auth.keys import API_KEY_HEADER
from fanfuse.auth.task_deliveries import SIGNATURE_HEADER
from fanfuse.fronts import functions
from fanfuse.fronts.mcp.transports import build_server, http_app
from fanfuse.fronts.serve.app import create_app
from fanfuse.http.backend import EmbeddedBackend
from fanfuse.platforms import Registry
from fanfuse.runtimes import cloud
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.support import logs
from fanfuse.support.logs import Trace, parse_trace
from fanfuse.wire.errors import TaskNotFound
from tests.support.fakes import FakePlatform
from tests.support.mcp_harness import ACCEPT, INITIALIZE
from tests.unit.runtimes.test_cloud_wrappers import AS_ALICE, MESSAGE, _Service, app, call

__all__ = ["app"]  # the fixture, used by name

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
LONG_SPAN = {"X-Cloud-Trace-Context": f"{TRACE_ID}/{'9' * 4_400};o=1"}
"""The issue's header: a 4,400-digit span id (Python refuses int() past 4,300 digits)."""
HOSTILE = [
    LONG_SPAN,
    {"X-Cloud-Trace-Context": f"{TRACE_ID}/{'1' * 21}"},  # one digit past any 64-bit number
    {"traceparent": f"00-{TRACE_ID}-{'f' * 4_400}-01"},
]
"""What each front is sent (ASCII: what a header can carry)."""


def test_a_span_of_thousands_of_digits_is_no_span_not_an_exception() -> None:
    assert parse_trace(LONG_SPAN) is None
    for headers in HOSTILE:
        assert parse_trace(headers) is None, headers
    arabic_indic = "\u0661\u0662\u0663"  # digits to `\\d`, not to `[0-9]`
    assert parse_trace({"X-Cloud-Trace-Context": f"{TRACE_ID}/{arabic_indic}"}) is None
    # the largest 64-bit span still is one, in hex
    assert parse_trace({"X-Cloud-Trace-Context": f"{TRACE_ID}/{2**64 - 1}"}) == Trace(
        trace_id=TRACE_ID, span_id="f" * 16
    )


HEADER_TEXT = (
    st.text(alphabet=st.sampled_from("0123456789abcdefABCDEF/-;o=\t \u0661\u0669xz"), max_size=300)
    | st.builds(
        str.__mul__,
        st.sampled_from("0123456789f"),
        st.integers(0, 64) | st.integers(4_290, 6_000),  # and around Python's int() limit
    )
    | st.text(max_size=200)
)
"""Header-like text, runs of one digit up to past Python's int() limit, and anything."""


@given(
    cloud=HEADER_TEXT,
    parent=HEADER_TEXT,
    prefix=st.sampled_from(["", TRACE_ID, f"00-{TRACE_ID}-", f"{TRACE_ID}/"]),
)
def test_any_header_value_parses_to_a_trace_or_none(cloud: str, parent: str, prefix: str) -> None:
    """Whatever the two headers hold: a Trace whose ids are what Cloud Logging takes (32 and
    16 lower-case hex digits), or None; never an exception."""
    found = parse_trace({"X-Cloud-Trace-Context": prefix + cloud, "traceparent": prefix + parent})
    if found is not None:
        assert re.fullmatch(r"[0-9a-f]{32}", found.trace_id), found
        assert found.span_id is None or re.fullmatch(r"[0-9a-f]{16}", found.span_id), found


# -- fanfuse serve ------------------------------------------------------------------------------


@pytest.fixture
async def serve(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, Starlette]]:
    """`fanfuse serve`'s app in process, with the key it prints sent by default."""
    issued: list[str] = []
    app = create_app(settings, registry=Registry.of([FakePlatform("a")]), on_key=issued.append)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {API_KEY_HEADER: issued[0]}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=headers
        ) as client:
            yield client, app


@pytest.mark.parametrize("headers", HOSTILE)
async def test_serve_answers_every_route_as_usual_whatever_the_trace_header(
    serve: tuple[httpx.AsyncClient, Starlette], headers: dict[str, str]
) -> None:
    client, _ = serve
    document = await client.get("/openapi.json", headers=headers)
    assert document.status_code == 200 and document.json()["openapi"] == "3.1.0"
    started = await client.post("/start_search", json={"query": "q"}, headers=headers)
    assert started.status_code == 202, started.text
    status = await client.get(f"/search_status/{started.json()['task_id']}", headers=headers)
    assert status.status_code == 200 and status.json()["task_id"] == started.json()["task_id"]
    unknown = await client.get("/search_status/nope", headers=headers)
    assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"


async def test_serve_answers_its_json_503_if_reading_the_trace_fails(
    serve: tuple[httpx.AsyncClient, Starlette], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(headers: object) -> Trace:
        raise RuntimeError("a parser bug")

    client, _ = serve
    monkeypatch.setattr(logs, "parse_trace", broken)
    answer = await client.get("/openapi.json")
    assert answer.status_code == 503 and answer.json()["error"] == "unavailable"


# -- the functions (and the Lambda's public targets, which are these) --------------------------


@pytest.mark.parametrize("headers", HOSTILE)
def test_the_functions_public_targets_answer_as_usual_whatever_the_trace_header(
    app: flask.Flask, headers: dict[str, str]
) -> None:
    # a double with the service's methods the targets call, not a SearchService
    cloud._service = _Service(TaskNotFound("t1"))  # type: ignore[assignment]
    with app.test_request_context("/search_status/openapi.json", headers=headers):
        document = functions.search_status(flask.request)
    assert document.status_code == 200 and json.loads(document.get_data())["openapi"]
    missing = call(
        app, functions.cancel_search, TaskNotFound("t1"), {"task_id": "t1"}, headers | AS_ALICE
    )
    assert missing.status_code == 404 and missing.get_json()["error"] == "not_found"


@pytest.mark.parametrize("headers", HOSTILE)
def test_a_task_target_gives_its_verdict_whatever_the_trace_header(
    app: flask.Flask, headers: dict[str, str]
) -> None:
    """A task target is reachable by anyone at the HTTP level: its trace is read before the
    delivery is verified, so a forged header must not crash it either."""
    service = _Service(RuntimeError("unused"))
    forged = {**headers, SIGNATURE_HEADER: "t=1,e=2,sha256=00"}
    answer = call(app, functions.run_platform, service, MESSAGE, forged)
    assert answer.status_code == 401 and answer.get_json()["error"] == "unauthorized"


def test_the_functions_answer_their_json_503_if_reading_the_trace_fails(
    app: flask.Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(headers: object) -> Trace:
        raise RuntimeError("a parser bug")

    monkeypatch.setattr(logs, "parse_trace", broken)
    # a double with the service's methods the targets call, not a SearchService
    cloud._service = _Service(TaskNotFound("t1"))  # type: ignore[assignment]
    with app.test_request_context("/search_status/openapi.json"):
        answer = functions.search_status(flask.request)
    assert answer.status_code == 503 and answer.get_json()["error"] == "unavailable"
    delivery = call(app, functions.aggregate, _Service(RuntimeError("unused")), {"task_id": "t1"})
    assert delivery.status_code == 503 and delivery.get_json()["error"] == "unavailable"


# -- fanfuse mcp --http ---------------------------------------------------------------------------


@pytest.fixture
async def backend(settings: Settings) -> AsyncIterator[EmbeddedBackend]:
    async with EmbeddedRuntime(settings, registry=Registry.of([FakePlatform("a")])) as runtime:
        yield EmbeddedBackend(runtime)


def test_the_mcp_http_front_answers_as_usual_whatever_the_trace_header(
    backend: EmbeddedBackend,
) -> None:
    app = http_app(build_server(backend, 10.0), "127.0.0.1", [], None)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        for headers in HOSTILE:
            answer = client.post("/mcp", json=INITIALIZE, headers={**ACCEPT, **headers})
            assert answer.status_code == 200, answer.text
