"""The client's credentials (`fanfuse.auth.outbound`): the pure choices, and each flow's request.

SigV4 is checked the way API Gateway checks it: a 127.0.0.1 server receives the client's real
request and recomputes the signature with botocore from what it received (method, path, query,
the headers the signature names, the body's hash) and the caller's secret; a changed body, a
wrong secret or another region does not verify. The ID-token modes are verified by the front
itself in tests/integration/test_client_auth.py.
"""

from __future__ import annotations

import hmac
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import get_args

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from pydantic import SecretStr
from pytest_httpserver import HTTPServer
from typer.testing import CliRunner
from werkzeug import Request, Response

from fanfuse.auth.keys import API_KEY_HEADER
from fanfuse.auth.outbound import (
    ApiKeyAuth,
    AuthMode,
    BearerToken,
    Chain,
    ClientAuth,
    ClientAuthError,
    GoogleIdToken,
    SigV4,
    aws_region_of,
    google_audience,
    infer_mode,
    signed_headers,
)
from fanfuse.cli.main import app
from fanfuse.http.client import HttpSearchClient
from fanfuse.settings.client import AuthName
from fanfuse.wire.errors import FanfuseError
from tests.support.platforms.harness import loopback_server

KEY = "ff_0123456789abcdef_" + "s" * 43
API = "https://abc123.execute-api.eu-west-3.amazonaws.com/start_search"
CREDS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
TEMPORARY = Credentials("ASIAEXAMPLE", "secret-of-a-session", "session-token-xyz")
SIGNATURE = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), "
    r"Signature=(?P<signature>[0-9a-f]{64})$"
)


# ---------------------------------------------------------------------------------------------
# Choices


def test_the_cli_spells_every_mode_and_only_those() -> None:
    assert set(get_args(AuthName)) == {m.value for m in AuthMode}


@pytest.mark.parametrize(
    ("url", "region"),
    [
        (API, "eu-west-3"),
        ("https://x9.execute-api.us-east-1.amazonaws.com/search_status/t1?x=1", "us-east-1"),
        ("https://start-search-abc-uc.a.run.app", None),
        ("https://execute-api.example.com/start_search", None),
        ("http://127.0.0.1:8000/start_search", None),
    ],
)
def test_an_api_gateway_host_names_its_region(url: str, region: str | None) -> None:
    assert aws_region_of(url) == region


@pytest.mark.parametrize(
    ("url", "audience"),
    [
        ("https://start-search-abc-uc.a.run.app/", "https://start-search-abc-uc.a.run.app"),
        ("https://search-status-abc-uc.a.run.app/t1", "https://search-status-abc-uc.a.run.app"),
        (
            "https://us-central1-proj.cloudfunctions.net/search_status/t1?x=1",
            "https://us-central1-proj.cloudfunctions.net/search_status",
        ),
        ("http://127.0.0.1:8080/start_search", "http://127.0.0.1:8080"),
    ],
)
def test_a_google_token_is_minted_for_the_receiving_service(url: str, audience: str) -> None:
    assert google_audience(url) == audience


@pytest.mark.parametrize(
    ("auth", "endpoint", "mode"),
    [
        (ClientAuth(), "http://127.0.0.1:1/start_search", None),
        (ClientAuth(api_key=SecretStr(KEY)), "http://127.0.0.1:1/s", AuthMode.API_KEY),
        (ClientAuth(id_token=SecretStr("t")), "http://127.0.0.1:1/s", AuthMode.FIREBASE),
        (ClientAuth(id_token_file=Path("t")), API, AuthMode.FIREBASE),
        (ClientAuth(api_key=SecretStr(KEY)), API, AuthMode.SIGV4),
        (ClientAuth(audience="aud"), "https://x.a.run.app", AuthMode.GOOGLE_ID_TOKEN),
        (ClientAuth(google_credentials=Path("k.json")), "https://x", AuthMode.GOOGLE_ID_TOKEN),
        (ClientAuth(mode=AuthMode.API_KEY, api_key=SecretStr(KEY)), API, AuthMode.API_KEY),
    ],
)
def test_the_mode_is_the_named_one_else_inferred(
    auth: ClientAuth, endpoint: str, mode: AuthMode | None
) -> None:
    assert auth.resolved(endpoint) is mode
    if auth.mode is None:
        assert infer_mode(auth, endpoint) is mode


def test_what_each_mode_builds_and_an_api_key_rides_along() -> None:
    assert ClientAuth().build("http://127.0.0.1:1/s") is None
    assert isinstance(ClientAuth(api_key=SecretStr(KEY)).build("http://h/s"), ApiKeyAuth)
    alone = ClientAuth(id_token=SecretStr("t")).build("http://h/s")
    assert isinstance(alone, BearerToken)
    both = ClientAuth(api_key=SecretStr(KEY), mode=AuthMode.SIGV4, aws_region="eu-west-1")
    chained = both.build("http://h/s")
    assert isinstance(chained, Chain)
    first, second = chained.parts
    assert isinstance(first, ApiKeyAuth) and isinstance(second, SigV4)  # the key is signed too
    assert second.region == "eu-west-1" and chained.requires_request_body
    google = ClientAuth(mode=AuthMode.GOOGLE_ID_TOKEN, audience="a").build("https://h")
    assert isinstance(google, GoogleIdToken) and google.audience == "a"
    assert isinstance(ClientAuth().build(API), SigV4)  # region from the host


@pytest.mark.parametrize(
    ("auth", "says"),
    [
        (ClientAuth(mode=AuthMode.API_KEY), "--api-key or FANFUSE_API_KEY"),
        (ClientAuth(mode=AuthMode.FIREBASE), "FANFUSE_ID_TOKEN or --id-token-file"),
    ],
)
def test_a_mode_without_its_credential_is_refused_before_anything_is_sent(
    auth: ClientAuth, says: str
) -> None:
    with pytest.raises(ClientAuthError, match=re.escape(says)):
        auth.build("http://127.0.0.1:1/start_search")


def test_sigv4_without_a_region_says_how_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    with pytest.raises(ClientAuthError, match="--aws-region"):
        ClientAuth(mode=AuthMode.SIGV4).build("http://127.0.0.1:1/start_search")


def test_no_secret_shows_in_a_repr() -> None:
    auth = ClientAuth(api_key=SecretStr(KEY), id_token=SecretStr("eyJtoken"))
    built = ClientAuth(api_key=SecretStr(KEY), id_token=SecretStr("eyJtoken")).build("http://h")
    for text in (repr(auth), str(auth), repr(built), repr(ApiKeyAuth(KEY))):
        assert KEY not in text and "eyJtoken" not in text


# ---------------------------------------------------------------------------------------------
# What goes on the wire


@dataclass
class Received:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes


@pytest.fixture(scope="module")
def wire() -> Iterator[HTTPServer]:
    srv = loopback_server()
    yield srv
    srv.stop()


@pytest.fixture
def received(wire: HTTPServer) -> Iterator[list[Received]]:
    """Every request the server got; it answers as start_search would (202 Accepted)."""
    seen: list[Received] = []

    def answer(request: Request) -> Response:
        seen.append(
            Received(
                request.method,
                request.url,
                {k.lower(): v for k, v in request.headers.items()},
                request.get_data(),
            )
        )
        status_url = wire.url_for("/s/t1")
        body = json.dumps({"task_id": "t1", "status": "pending", "status_url": status_url})
        return Response(body, status=202, mimetype="application/json")

    wire.expect_request(re.compile("/.*")).respond_with_handler(answer)
    yield seen
    wire.clear()


def sigv4_valid(got: Received, creds: Credentials, region: str, service: str) -> bool:
    """API Gateway's check, done with botocore from what the server received: the signature
    in `Authorization` over the request as it arrived, with the caller's secret."""
    found = SIGNATURE.match(got.headers.get("authorization", ""))
    if found is None or found["key"] != creds.access_key:
        return False
    if found["region"] != region or found["service"] != service:
        return False
    names = found["signed"].split(";")
    if any(name not in got.headers for name in names):
        return False
    request = AWSRequest(
        method=got.method,
        url=got.url,
        data=got.body,
        headers={name: got.headers[name] for name in names},
    )
    request.context["timestamp"] = got.headers["x-amz-date"]
    signer = SigV4Auth(creds, service, region)
    string_to_sign = signer.string_to_sign(request, signer.canonical_request(request))
    return hmac.compare_digest(signer.signature(string_to_sign, request), found["signature"])


async def test_a_sigv4_request_carries_a_signature_api_gateway_accepts(
    wire: HTTPServer, received: list[Received]
) -> None:
    auth = Chain(ApiKeyAuth(KEY), SigV4("eu-west-3", credentials=CREDS))
    client = HttpSearchClient(wire.url_for("/start_search?x=1"), auth=auth)
    accepted = await client.start({"query": "laser", "platform": "docs"})
    assert accepted.task_id == "t1"
    [got] = received
    assert sigv4_valid(got, CREDS, "eu-west-3", "execute-api")
    signed = SIGNATURE.match(got.headers["authorization"])
    assert signed is not None
    assert set(signed["signed"].split(";")) == {"content-type", "host", "x-amz-date", "x-api-key"}
    assert got.headers["x-api-key"] == KEY
    when = datetime.strptime(got.headers["x-amz-date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert abs(when.timestamp() - time.time()) < 300  # API Gateway allows 5 minutes
    # What API Gateway refuses: another body, another secret, another region or service.
    assert not sigv4_valid(Received(**{**got.__dict__, "body": got.body + b" "}), CREDS,
                           "eu-west-3", "execute-api")  # fmt: skip
    assert not sigv4_valid(got, Credentials(CREDS.access_key, "wrong"), "eu-west-3", "execute-api")
    assert not sigv4_valid(got, CREDS, "us-east-1", "execute-api")
    assert not sigv4_valid(got, CREDS, "eu-west-3", "lambda")


async def test_sigv4_signs_each_call_with_temporary_credentials_and_their_token(
    wire: HTTPServer, received: list[Received]
) -> None:
    """A GET (status: no body, the empty payload's hash) and a POST with a session token."""
    sign = SigV4("us-east-1", credentials=TEMPORARY)
    client = HttpSearchClient(wire.url_for("/start_search"), auth=sign)
    accepted = await client.start({"query": ["a", "b"]})
    async with httpx.AsyncClient(auth=sign) as http:
        await http.get(accepted.status_url, params={"wait": "1"})
    assert len(received) == 2
    for got in received:
        assert got.headers["x-amz-security-token"] == "session-token-xyz"
        assert "x-amz-security-token" in got.headers["authorization"]
        assert sigv4_valid(got, TEMPORARY, "us-east-1", "execute-api")
    assert received[1].method == "GET" and received[1].body == b""


def test_sigv4_signs_only_headers_a_proxy_keeps() -> None:
    headers = {"Host": "h", "Content-Type": "application/json", "Accept-Encoding": "gzip",
               "Connection": "keep-alive", "User-Agent": "x", API_KEY_HEADER: KEY}  # fmt: skip
    assert set(signed_headers(headers)) == {"host", "content-type", "x-api-key"}


def test_sigv4_with_credentials_from_the_default_chain(
    monkeypatch: pytest.MonkeyPatch, wire: HTTPServer, received: list[Received]
) -> None:
    """No credentials given: botocore's chain (here the environment) supplies them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDCHAIN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "chain-secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    auth = ClientAuth(mode=AuthMode.SIGV4, aws_region="ap-south-1").build(wire.url_for("/s"))
    assert auth is not None
    httpx.post(wire.url_for("/start_search"), json={"query": "q"}, auth=auth)
    [got] = received
    assert sigv4_valid(got, Credentials("AKIDCHAIN", "chain-secret"), "ap-south-1", "execute-api")


async def test_a_firebase_token_file_is_read_on_every_call(
    tmp_path: Path, wire: HTTPServer, received: list[Received]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first-token\n")
    client = HttpSearchClient(
        wire.url_for("/start_search"), auth=ClientAuth(id_token_file=token_file).build("http://h")
    )
    await client.start({"query": "q"})
    token_file.write_text("second-token")  # the session was refreshed
    await client.start({"query": "q"})
    assert [r.headers["authorization"] for r in received] == [
        "Bearer first-token",
        "Bearer second-token",
    ]
    token_file.write_text("")
    with pytest.raises(ClientAuthError, match="is empty"):
        await client.start({"query": "q"})
    token_file.unlink()
    with pytest.raises(ClientAuthError, match="cannot read the ID token file"):
        await client.start({"query": "q"})
    assert len(received) == 2  # nothing sent without a token


async def test_the_api_key_shorthand_and_no_credential(
    wire: HTTPServer, received: list[Received]
) -> None:
    await HttpSearchClient(wire.url_for("/start_search"), api_key=KEY).start({"query": "q"})
    await HttpSearchClient(wire.url_for("/start_search")).start({"query": "q"})
    assert received[0].headers[API_KEY_HEADER.lower()] == KEY
    assert API_KEY_HEADER.lower() not in received[1].headers
    assert "authorization" not in received[1].headers


async def test_a_google_key_file_that_is_not_a_service_account_key_is_named(
    tmp_path: Path,
) -> None:
    user = tmp_path / "adc.json"
    user.write_text('{"type": "authorized_user", "client_id": "x"}')
    auth = GoogleIdToken("aud", user)
    with pytest.raises(ClientAuthError, match="not a service-account key file"):
        await HttpSearchClient("http://127.0.0.1:9/start_search", auth=auth).start({"query": "q"})
    # A FanfuseError below 500: `fanfuse search` prints it in one line and exits 2.
    assert isinstance(ClientAuthError("x"), FanfuseError) and ClientAuthError.status_code < 500


@pytest.mark.parametrize("command", ["search", "mcp"])
def test_the_commands_say_what_a_mode_lacks_before_calling(command: str) -> None:
    args = [command, "--endpoint", "http://127.0.0.1:9/start_search", "--auth", "api-key"]
    result = CliRunner().invoke(app, args + (["q"] if command == "search" else []),
                                env={"FANFUSE_API_KEY": None})  # fmt: skip
    assert result.exit_code == 2
    assert "--auth api-key: give --api-key or FANFUSE_API_KEY" in result.output
