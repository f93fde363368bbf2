"""Each way the client authenticates, verified by the front: a `fanfuse serve` child process on
127.0.0.1 that accepts API keys, Google ID tokens and Firebase ID tokens, against key sets
served on 127.0.0.1.

- Google ID tokens are minted by google-auth itself: `service_account.IDTokenCredentials` signs
  a JWT with a service-account key made here and exchanges it at the key file's `token_uri`, a
  local token endpoint that checks that assertion and answers an ID token signed by the test
  "Google" key, whose certificate the server fetches from FANFUSE_GOOGLE_CERTS_URL.
- Firebase ID tokens are signed by the test "Firebase" key, published at
  FANFUSE_FIREBASE_CERTS_URL, as an app's user would get them from Firebase Authentication.

Each search runs to its end through `HttpSearchClient` (start, then status polls), through
`fanfuse search --endpoint`, or through the MCP server's remote backend, and its owner is the
token's subject: the token, not something else, is what the server took as the caller.
(SigV4 is checked by signature in tests/unit/auth/test_outbound_auth.py: nothing local verifies it.)
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from cryptography.hazmat.primitives import serialization
from google.auth import jwt
from pydantic import SecretStr
from pytest_httpserver import HTTPServer
from typer.testing import CliRunner
from werkzeug import Request, Response

from fanfuse.auth.outbound import AuthMode, ClientAuth, GoogleIdToken
from fanfuse.cli.main import app
from fanfuse.fronts.mcp.access import LOCAL_CALLER
from fanfuse.http.backend import open_backend
from fanfuse.http.client import HttpSearchClient
from fanfuse.tools.devstack.serve_process import ServeProcess
from fanfuse.wire.errors import ApiError
from fanfuse.wire.models import TaskView
from tests.support.platforms.harness import loopback_server
from tests.support.signing import (
    GOOGLE_ISSUER,
    PROJECT,
    KeySet,
    SigningKey,
    make_key,
    user_claims,
)

AUDIENCE = "https://fanfuse-api.example"
SERVICE_ACCOUNT = "caller@demo-fanfuse.iam.gserviceaccount.com"
SA_SUBJECT = "104857600000000000001"
GOOGLE_TOKEN = "https://oauth2.googleapis.com/token"
"""The audience google-auth gives a service account's assertion, wherever it sends it."""
CORPUS = {
    "D1": "Microwave radiation fed through a rectangular waveguide.",
    "D2": "The dielectric constant of liquids measured at microwave frequencies.",
    "D3": "A laser produces coherent light by stimulated emission.",
}
REQUEST = {"query": "microwave", "platform": "docs", "max_results": 2}


class TokenEndpoint:
    """Google's OAuth token endpoint in small: a service account's signed JWT assertion in, an
    ID token for its `target_audience` out (signed by the "Google" key). `lifetime` is how long
    the tokens it mints live; `minted` counts them."""

    def __init__(self, server: HTTPServer, account: SigningKey, google: SigningKey) -> None:
        self.account = account
        self.google = google
        self.url = server.url_for("/token")
        self.lifetime = 3600
        self.minted = 0
        self._lock = threading.Lock()
        server.expect_request("/token", method="POST").respond_with_handler(self.answer)

    def answer(self, request: Request) -> Response:
        form = parse_qs(request.get_data(as_text=True))
        assertion = form.get("assertion", [""])[0]
        try:  # the assertion must be signed by the service account, for Google's token URL
            claims = jwt.decode(  # type: ignore[no-untyped-call]
                assertion, certs={self.account.kid: self.account.cert_pem}, audience=GOOGLE_TOKEN
            )
        except ValueError as exc:
            return Response(json.dumps({"error": "invalid_grant", "detail": str(exc)}), 400)
        now = int(time.time())
        token = self.google.sign(
            {
                "iss": GOOGLE_ISSUER,
                "aud": claims["target_audience"],
                "sub": SA_SUBJECT,
                "email": claims["iss"],
                "email_verified": True,
                "iat": now,
                "exp": now + self.lifetime,
            }
        )
        with self._lock:
            self.minted += 1
        return Response(json.dumps({"id_token": token}), mimetype="application/json")


@pytest.fixture(scope="module")
def issuers() -> Iterator[HTTPServer]:
    server = loopback_server()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def google_key() -> SigningKey:
    return make_key("google-1")


@pytest.fixture(scope="module")
def firebase_key() -> SigningKey:
    return make_key("firebase-1")


@pytest.fixture(scope="module")
def account_key() -> SigningKey:
    return make_key("sa-key-1")


@pytest.fixture(scope="module")
def token_endpoint(
    issuers: HTTPServer, account_key: SigningKey, google_key: SigningKey
) -> TokenEndpoint:
    return TokenEndpoint(issuers, account_key, google_key)


@pytest.fixture(scope="module")
def key_sets(
    issuers: HTTPServer, google_key: SigningKey, firebase_key: SigningKey
) -> tuple[KeySet, KeySet]:
    google = KeySet(issuers, "/oauth2/v1/certs")
    google.publish(google_key)
    firebase = KeySet(issuers, "/firebase/certs")
    firebase.publish(firebase_key)
    return google, firebase


@pytest.fixture(scope="module")
def key_file(
    tmp_path_factory: pytest.TempPathFactory, account_key: SigningKey, token_endpoint: TokenEndpoint
) -> Path:
    """A service-account key file as the IAM console downloads it, its token_uri local."""
    pem = account_key.private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    info = {
        "type": "service_account",
        "project_id": PROJECT,
        "private_key_id": account_key.kid,
        "private_key": pem,
        "client_email": SERVICE_ACCOUNT,
        "client_id": SA_SUBJECT,
        "token_uri": token_endpoint.url,
    }
    path = tmp_path_factory.mktemp("google") / "caller.json"
    path.write_text(json.dumps(info), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
    key_sets: tuple[KeySet, KeySet],
) -> Iterator[ServeProcess]:
    tmp = tmp_path_factory.mktemp("serve-auth")
    corpus = tmp / "lab.trec"
    corpus.write_text(
        "".join(
            f"<DOC>\n<DOCNO>{k}</DOCNO>\n<TEXT>{v}</TEXT>\n</DOC>\n" for k, v in CORPUS.items()
        ),
        encoding="utf-8",
    )
    google, firebase = key_sets
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
    env.update(
        {
            "FANFUSE_CACHE_DIR": str(tmp / "cache"),
            "FANFUSE_DB_PATH": str(tmp / "serve.db"),
            "FANFUSE_DOCS_CORPUS": str(corpus),
            "FANFUSE_PROGRESS_INTERVAL": "0",
            "FANFUSE_DEADLINE_SECONDS": "20",
            "FANFUSE_ID_TOKEN_AUDIENCES": json.dumps([AUDIENCE]),
            "FANFUSE_ID_TOKEN_PRINCIPALS": json.dumps([SERVICE_ACCOUNT]),
            "FANFUSE_GOOGLE_CERTS_URL": google.url,
            "FANFUSE_FIREBASE_PROJECT": PROJECT,
            "FANFUSE_FIREBASE_CERTS_URL": firebase.url,
        }
    )
    with ServeProcess("--warm", "docs", env=env) as process:
        yield process


def endpoint(server: ServeProcess) -> str:
    return f"{server.url}/start_search"


def owned_by(view: TaskView, subject: str) -> bool:
    """The search's owner is this subject (written as a suffix so that an issuer prefix on
    owners, `google:`/`firebase:`, keeps the check true)."""
    return view.owner is not None and view.owner.endswith(subject)


async def search(server: ServeProcess, auth: ClientAuth) -> TaskView:
    client = HttpSearchClient(endpoint(server), poll=0.05, auth=auth.build(endpoint(server)))
    return await client.search(REQUEST)


async def test_an_api_key(server: ServeProcess) -> None:
    view = await search(server, ClientAuth(api_key=SecretStr(server.api_key)))
    assert view.status.value == "completed" and view.results
    assert owned_by(view, "local")  # the owner of the key `serve` printed


async def test_a_google_id_token_minted_from_a_service_account_key_file(
    server: ServeProcess, key_file: Path, token_endpoint: TokenEndpoint
) -> None:
    auth = ClientAuth(mode=AuthMode.GOOGLE_ID_TOKEN, audience=AUDIENCE, google_credentials=key_file)
    before = token_endpoint.minted
    view = await search(server, auth)
    assert view.status.value == "completed" and view.results
    assert owned_by(view, SA_SUBJECT)
    assert token_endpoint.minted == before + 1  # one token for the start and every poll


async def test_a_google_id_token_from_application_default_credentials(
    server: ServeProcess, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
    view = await search(server, ClientAuth(audience=AUDIENCE))  # inferred: google-id-token
    assert view.status.value == "completed" and owned_by(view, SA_SUBJECT)


async def test_a_google_id_token_is_refreshed_before_it_expires(
    server: ServeProcess, key_file: Path, token_endpoint: TokenEndpoint
) -> None:
    """A token within google-auth's refresh threshold (3 min 45 s) of its expiry is replaced
    before the next call, while a fresh one is reused."""
    flow = GoogleIdToken(AUDIENCE, key_file)
    client = HttpSearchClient(endpoint(server), auth=flow)
    accepted = await client.start(REQUEST)
    await client.status(accepted)
    assert flow.minted == 1
    token_endpoint.lifetime = 200  # valid, but too close to its end to be sent again
    try:
        fresh = GoogleIdToken(AUDIENCE, key_file)
        client = HttpSearchClient(endpoint(server), auth=fresh)
        accepted = await client.start(REQUEST)
        for _ in range(2):
            view = await client.status(accepted)
            assert owned_by(view, SA_SUBJECT)
        assert fresh.minted == 3  # one per call: each token was near its expiry
    finally:
        token_endpoint.lifetime = 3600


async def test_a_google_id_token_for_another_audience_is_refused(
    server: ServeProcess, key_file: Path
) -> None:
    auth = ClientAuth(audience="https://someone-else.example", google_credentials=key_file)
    with pytest.raises(ApiError) as refused:
        await search(server, auth)
    assert refused.value.status_code == 401
    assert "audience" in str(refused.value)


async def test_a_firebase_id_token(server: ServeProcess, firebase_key: SigningKey) -> None:
    token = firebase_key.sign(user_claims("firebase-user-7"))
    view = await search(server, ClientAuth(id_token=SecretStr(token)))  # inferred: firebase
    assert view.status.value == "completed" and owned_by(view, "firebase-user-7")


async def test_a_firebase_token_signed_by_another_key_is_refused(server: ServeProcess) -> None:
    forged = make_key("firebase-1").sign(user_claims("firebase-user-7"))
    with pytest.raises(ApiError) as refused:
        await search(server, ClientAuth(id_token=SecretStr(forged)))
    assert refused.value.status_code == 401


def test_fanfuse_search_endpoint_with_a_firebase_token_from_the_environment(
    server: ServeProcess, firebase_key: SigningKey
) -> None:
    token = firebase_key.sign(user_claims("cli-user"))
    result = CliRunner().invoke(
        app,
        ["search", "--endpoint", endpoint(server), "--json", "-p", "docs", "-n", "2", "laser"],
        env={"FANFUSE_ID_TOKEN": token, "FANFUSE_API_KEY": None},
    )
    assert result.exit_code == 0, result.output
    view = TaskView.model_validate_json(result.stdout)
    assert view.status.value == "completed" and owned_by(view, "cli-user")
    assert token not in result.output


def test_fanfuse_search_endpoint_with_a_google_key_file(
    server: ServeProcess, key_file: Path
) -> None:
    args = ["search", "--endpoint", endpoint(server), "--json", "-p", "docs", "laser",
            "--auth", "google-id-token", "--audience", AUDIENCE,
            "--google-credentials", str(key_file)]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"FANFUSE_API_KEY": None})
    assert result.exit_code == 0, result.output
    assert owned_by(TaskView.model_validate_json(result.stdout), SA_SUBJECT)


def test_fanfuse_search_says_what_a_mode_lacks(server: ServeProcess) -> None:
    result = CliRunner().invoke(
        app,
        ["search", "--endpoint", endpoint(server), "--auth", "firebase", "laser"],
        env={"FANFUSE_ID_TOKEN": None, "FANFUSE_ID_TOKEN_FILE": None},
    )
    assert result.exit_code == 2
    assert "FANFUSE_ID_TOKEN or --id-token-file" in result.output


async def test_the_mcp_remote_backend_sends_the_credential(
    server: ServeProcess, firebase_key: SigningKey
) -> None:
    token = firebase_key.sign(user_claims("agent-user"))
    auth = ClientAuth(id_token=SecretStr(token)).build(endpoint(server))
    async with open_backend(endpoint(server), auth=auth) as backend:
        # The remote backend ignores the MCP-side caller: the stack verifies the credential.
        accepted = await backend.start(REQUEST, LOCAL_CALLER)
        view: Any = await backend.status(accepted.task_id, LOCAL_CALLER)
        assert owned_by(view, "agent-user")
