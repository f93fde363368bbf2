"""Every parser of what a caller (or a provider) controls, fuzzed with hypothesis: the request body
as the fronts decode it, the credentials (API keys, bearer ID tokens, API Gateway's claims), and
each header a front or the runner reads (`Content-Length`, `Last-Event-ID`, a task's signature,
a provider's `Retry-After`; the trace headers: tests/unit/fronts/test_trace_headers.py). Whatever
arrives, each answers a value of its type or the refusal it documents (a FanfuseError with its
4xx, or None), never another exception (which a front would answer 5xx). Issue 29.

What the fuzz found, now fixed: a provider's `Retry-After` with a 20-digit year or zone raised
OverflowError out of `parse_retry_after`; `fanfuse serve` read `Content-Length` with
`str.isdigit` and `int()` (`²` or 5,000 digits: a 503).
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import re
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fanfuse.auth import keys, tokens
from fanfuse.auth.callers import Authenticator, gateway_caller
from fanfuse.auth.certs import CertCache
from fanfuse.auth.task_deliveries import SIGNATURE_HEADER, sign, signature_problem
from fanfuse.fronts.serve.watch import parse_last_event_id
from fanfuse.http import api
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.support.retry_after import parse_retry_after
from fanfuse.wire.errors import FanfuseError, Forbidden, Unauthorized
from fanfuse.wire.models import Caller, utcnow

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
digits = st.builds(
    str.__mul__, st.sampled_from("0123456789"), st.integers(0, 30) | st.integers(4_290, 5_000)
)
"""Runs of one digit: short, and around Python's int() limit (4,300 digits)."""
header_text = (
    st.text(max_size=300) | digits | st.text(alphabet="0123456789 ,:+-GMTJanMo", max_size=60)
)


# -- a provider's Retry-After (net/runner.py), and the stub dispatcher's -----------------------

http_dates = st.builds(
    "{}, {} {} {} {}:{}:{} {}".format,
    st.sampled_from(["Mon", "Tue", "Xyz", ""]),
    digits,
    st.sampled_from(["Jan", "Feb", "Foo"]),
    digits,
    digits,
    digits,
    digits,
    st.sampled_from(["GMT", "+0000", "-9999", "+" + "9" * 14, "UT"]),
)


@given(value=header_text | http_dates | st.none())
def test_a_retry_after_is_seconds_or_none(value: str | None) -> None:
    wait = parse_retry_after(value)
    assert wait is None or (math.isfinite(wait) and wait >= 0), (value, wait)


def test_a_retry_after_with_a_twenty_digit_year_or_zone_is_none() -> None:
    """What the fuzz found: OverflowError out of email.utils' date parser."""
    assert parse_retry_after("Mon, 01 Jan 99999999999999999999 00:00:00 GMT") is None
    assert parse_retry_after("Mon, 01 Jan 2026 00:00:00 +99999999999999") is None
    assert parse_retry_after("120") == 120.0


# -- Content-Length (serve reads it before a byte of the body) ---------------------------------


@given(header=header_text | st.none())
def test_a_declared_length_is_a_bounded_number_or_none(header: str | None) -> None:
    length = api.declared_length(header)
    assert length is None or 0 <= length <= api.MAX_BODY_BYTES + 1
    text = (header or "").strip()
    if text.isascii() and text.isdigit() and len(text) < 7:  # a number of any size read exactly
        assert length == min(int(text), api.MAX_BODY_BYTES + 1)


@pytest.mark.parametrize("header", ["9" * 5_000, "\u00b2", "\u0661\u0662", "-1", "1e3", ""])
def test_no_content_length_makes_an_exception(header: str) -> None:
    length = api.declared_length(header)
    assert length in (None, api.MAX_BODY_BYTES + 1)


# -- the request body, as both fronts decode it -------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=15,
)
bodies = (
    json_values.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=300)
    | st.builds(lambda n: b"[" * n + b"]" * n, st.integers(0, 3_000))
    | st.builds(lambda d: b'{"task_id": ' + d.encode() + b"}", digits)
    | st.builds(lambda t: json.dumps({"task_id": t}).encode(), st.text(max_size=200))
)
content_types = st.sampled_from(
    ["application/json", "application/json; charset=utf-8", "APPLICATION/JSON", "text/plain", ""]
) | st.text(max_size=40)


@SETTINGS
@given(raw=bodies, content_type=content_types | st.none())
def test_any_body_decodes_or_is_a_4xx(raw: bytes, content_type: str | None) -> None:
    """`decode_json`, then the cancel body's model: a value, or a FanfuseError of 400, 413 or
    415 (the search body's model is fuzzed through the service:
    tests/unit/wire/test_request_fuzz.py)."""
    try:
        data = api.decode_json(raw, content_type)
        parsed = api.parse(api.CancelRequest, data)
        api.check_task_id(parsed.task_id)
    except FanfuseError as exc:
        assert exc.status_code in (400, 413, 415), exc


# -- credentials -------------------------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


jwt_like = st.builds(
    lambda header, claims, signature: f"{b64(header)}.{b64(claims)}.{signature}",
    json_values.map(lambda v: json.dumps(v).encode())
    | st.fixed_dictionaries(
        {"alg": st.sampled_from(["RS256", "none", "HS256"]), "kid": st.text(max_size=5)}
    ).map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=40),
    json_values.map(lambda v: json.dumps(v).encode())
    | st.fixed_dictionaries(
        {
            "iss": st.sampled_from(
                ["https://securetoken.google.com/demo-x", "accounts.google.com", "x"]
            ),
            "aud": st.sampled_from(["demo-x", "aud", ["demo-x"]]) | json_values,
            "sub": json_values,
            "exp": st.integers() | st.floats() | json_values,
            "iat": st.integers() | json_values,
            "auth_time": st.integers() | json_values,
            "firebase": json_values,
        }
    ).map(lambda v: json.dumps(v).encode()),
    st.sampled_from(["", "c2ln", "!!"]) | st.text(max_size=20),
)
TOKEN_SETTINGS = Settings(
    firebase_project="demo-x",
    id_token_audiences=["aud"],
    id_token_principals=["someone"],
    firebase_emulator_tokens=True,
    auth_emulator_host="127.0.0.1:9099",  # the unsigned path is fuzzed too
)
NO_KEYS = CertCache(fetch=lambda url: ({}, "max-age=3600"))
"""An issuer that publishes no key (nothing is fetched from anywhere)."""


@SETTINGS
@given(header=st.text(max_size=100) | jwt_like.map("Bearer {}".format) | jwt_like)
def test_any_bearer_token_is_claims_or_a_401_or_403(header: str) -> None:
    token = tokens.bearer(header)
    if token is None:
        return
    assert token == token.strip() and token
    try:
        claims = tokens.caller_claims(token, TOKEN_SETTINGS, certs=NO_KEYS)
    except (Unauthorized, Forbidden):
        return
    # Only an emulator token of the demo project can get this far here.
    assert claims["iss"] == "https://securetoken.google.com/demo-x", claims


@given(text=st.text(max_size=120) | st.from_regex(keys.KEY, fullmatch=True))
def test_any_api_key_text_parses_to_an_id_and_a_secret_or_none(text: str) -> None:
    parsed = keys.parse_key(text)
    if parsed is not None:
        key_id, secret = parsed
        assert re.fullmatch(r"[0-9a-f]{16}", key_id) and len(secret) == 43


@pytest.fixture(scope="module")
def authenticator() -> Authenticator:
    store = SqliteStore(":memory:")
    _, record = keys.new_key("alice", "", None, None, utcnow())
    store.put_key(record)
    return Authenticator(Settings(trust_gateway=True), store)


@SETTINGS
@given(
    key=st.text(max_size=80) | st.from_regex(keys.KEY, fullmatch=True),
    userinfo=st.text(max_size=80)
    | json_values.map(lambda v: b64(json.dumps(v).encode()))
    | st.builds(lambda n: b64(b"[" * n), st.integers(0, 3_000)),
)
def test_any_key_or_gateway_header_is_a_caller_or_a_401_or_403(
    authenticator: Authenticator, key: str, userinfo: str
) -> None:
    for headers in ({keys.API_KEY_HEADER: key}, {"X-Apigateway-Api-Userinfo": userinfo}):
        try:
            caller = authenticator.caller(headers)
        except (Unauthorized, Forbidden):
            continue
        assert isinstance(caller, Caller) and caller.subject.startswith("gateway:")
    with contextlib.suppress(Unauthorized):
        assert gateway_caller(userinfo).subject.startswith("gateway:")


# -- Last-Event-ID (serve's event stream) and a task delivery's signature -----------------------


@given(header=header_text | st.from_regex(r"[0-9]{17}-[0-9a-f]{16}", fullmatch=True) | st.none())
def test_any_last_event_id_is_an_id_the_stream_sends_or_none(header: str | None) -> None:
    parsed = parse_last_event_id(header)
    assert parsed is None or re.fullmatch(r"[0-9]{17}-[0-9a-f]{16}", parsed), parsed


@given(
    header=header_text
    | st.none()
    | st.builds("t={},e={},sha256={}".format, digits, digits, st.text(max_size=70)),
    body=st.binary(max_size=50),
)
def test_any_task_signature_is_checked_never_raised(header: str | None, body: bytes) -> None:
    problem: Any = signature_problem(header, "run_platform", body, "secret", time.time())
    assert isinstance(problem, str) and SIGNATURE_HEADER in problem


@given(
    body=st.binary(max_size=50),
    not_before=st.integers(0, 10**12 - 1),
    expires=st.integers(0, 10**12 - 1),
)
def test_a_signed_delivery_is_judged_by_its_window(
    body: bytes, not_before: int, expires: int
) -> None:
    now = time.time()
    header = sign("aggregate", body, "secret", not_before=not_before, expires=expires)
    problem = signature_problem(header, "aggregate", body, "secret", now)
    inside = not_before - tokens.CLOCK_SKEW <= now <= expires + tokens.CLOCK_SKEW
    assert (problem is None) == inside, (problem, not_before, expires)
    assert signature_problem(header, "run_platform", body, "secret", now) is not None
