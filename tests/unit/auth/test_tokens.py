"""ID and task tokens, verified against key sets served on 127.0.0.1 (tests/support/signing.py).

The tokens are real RS256 JWTs signed with test keys; google-auth verifies them with the
certificates the test server publishes, exactly as it would Google's and Firebase's.
"""

from __future__ import annotations

import base64
import json
import math
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pydantic import ValidationError
from pytest_httpserver import HTTPServer

from fanfuse.auth import certs as certs_module
from fanfuse.auth import tokens
from fanfuse.auth.certs import (
    MAX_AGE,
    MAX_STALE,
    MIN_INTERVAL,
    RETRY_INTERVAL,
    CertCache,
    cache_seconds,
    keys_of,
)
from fanfuse.auth.tokens import bearer, caller_claims, caller_subject, task_claims
from fanfuse.settings import Settings
from fanfuse.wire.errors import FanfuseError, Forbidden, Unauthorized, Unavailable
from tests.support.platforms.harness import loopback_server
from tests.support.signing import (
    GOOGLE_ISSUER,
    PROJECT,
    KeySet,
    SigningKey,
    claims,
    firebase_claims,
    make_key,
    unsigned,
)

AUDIENCE = "fanfuse-api"
SA = "fanfuse-tasks@demo-fanfuse.iam.gserviceaccount.com"
TARGET = "https://run-platform-abc-uc.a.run.app"
CALLER_SA = "caller@demo-fanfuse.iam.gserviceaccount.com"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return make_key("k1")


@pytest.fixture(scope="module")
def other() -> SigningKey:
    return make_key("k2")


@pytest.fixture(scope="module")
def issuers() -> Iterator[HTTPServer]:
    """One server for the module (stopping one takes half a second), emptied after each test."""
    srv = loopback_server()
    yield srv
    srv.stop()


@pytest.fixture
def server(issuers: HTTPServer) -> Iterator[HTTPServer]:
    yield issuers
    issuers.clear()


@pytest.fixture
def google(server: HTTPServer, key: SigningKey) -> KeySet:
    keys = KeySet(server, "/oauth2/v1/certs")
    keys.publish(key)
    return keys


@pytest.fixture
def firebase(server: HTTPServer, key: SigningKey) -> KeySet:
    keys = KeySet(server, "/robot/v1/metadata/x509/securetoken")
    keys.publish(key)
    return keys


@pytest.fixture
def settings(google: KeySet, firebase: KeySet) -> Settings:
    return Settings(
        firebase_project=PROJECT,
        id_token_audiences=[AUDIENCE],
        id_token_principals=[CALLER_SA, "1077", "jwk-user"],
        google_certs_url=google.url,
        firebase_certs_url=firebase.url,
        tasks_service_account=SA,
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache(clock: Clock) -> Iterator[CertCache]:
    yield CertCache(clock=clock)


def refused(error: type[FanfuseError], token: str, check: Any) -> str:
    """Run `check(token)`, which must raise `error`; the message, which never holds the token."""
    with pytest.raises(error) as caught:
        check(token)
    message = str(caught.value)
    assert token not in message or not token
    return message


# -- callers' ID tokens ------------------------------------------------------------------------


def test_a_valid_firebase_token_gives_its_claims(
    key: SigningKey, settings: Settings, cache: CertCache
) -> None:
    token = key.sign(firebase_claims(sub="alice-uid", email="alice@example.com"))
    verified = caller_claims(token, settings, certs=cache)
    assert verified["sub"] == "alice-uid" and verified["email"] == "alice@example.com"


@pytest.mark.parametrize("iss", ["accounts.google.com", "https://accounts.google.com"])
def test_a_valid_google_token_gives_its_claims(
    key: SigningKey, settings: Settings, cache: CertCache, iss: str
) -> None:
    token = key.sign(claims(iss, AUDIENCE, sub="1077"))
    assert caller_claims(token, settings, certs=cache)["sub"] == "1077"


NOW = int(time.time())


@pytest.mark.parametrize(
    ("bad_claims", "why"),
    [
        (firebase_claims(iat=NOW - 7200, exp=NOW - 3600), "it has expired"),
        (firebase_claims(iat=NOW + 3600, exp=NOW + 7200), "issued in the future"),
        (firebase_claims(aud="another-project"), "its audience is not one"),
        (
            firebase_claims(iss="https://securetoken.google.com/another-project"),
            "its issuer is not the expected one",
        ),
        (firebase_claims(sub=""), "names no subject"),
        (firebase_claims(auth_time=NOW + 3600), "auth_time is missing or in the future"),
        (claims(GOOGLE_ISSUER, "someone-else"), "its audience is not one"),
        (claims(GOOGLE_ISSUER, [AUDIENCE]), "its audience is not one"),  # any JSON, not a str
        (claims({"iss": GOOGLE_ISSUER}, AUDIENCE), "neither Firebase nor Google"),
        (claims("https://evil.example", AUDIENCE), "neither Firebase nor Google"),
    ],
)
def test_tokens_with_bad_claims_are_refused_saying_why(
    key: SigningKey, settings: Settings, cache: CertCache, bad_claims: dict[str, Any], why: str
) -> None:
    token = key.sign(bad_claims)
    message = refused(Unauthorized, token, lambda t: caller_claims(t, settings, certs=cache))
    assert why in message


def test_a_token_signed_with_another_key_is_refused(
    key: SigningKey, other: SigningKey, settings: Settings, cache: CertCache
) -> None:
    forged = other.sign(firebase_claims(), kid=key.kid)  # claims to be k1, signed by k2
    message = refused(Unauthorized, forged, lambda t: caller_claims(t, settings, certs=cache))
    assert message == "Firebase ID token refused: its signature does not verify"
    stranger = other.sign(firebase_claims())  # k2 is not published
    message = refused(Unauthorized, stranger, lambda t: caller_claims(t, settings, certs=cache))
    assert "signed with a key its issuer does not publish" in message


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (unsigned(firebase_claims(), "k1"), "not signed with RS256"),
        ("garbage", "not a well-formed JWT"),
        ("a.b.c", "not a well-formed JWT"),
        ("", "not a well-formed JWT"),
        ("e30.e30.", "neither Firebase nor Google"),  # {}.{}: no issuer at all
    ],
)
def test_unsigned_and_garbage_tokens_are_refused(
    settings: Settings, cache: CertCache, token: str, why: str
) -> None:
    assert why in refused(Unauthorized, token, lambda t: caller_claims(t, settings, certs=cache))


def test_token_kinds_not_configured_are_refused_naming_the_setting(
    key: SigningKey, settings: Settings, cache: CertCache
) -> None:
    bare = settings.model_copy(update={"firebase_project": None, "id_token_audiences": []})
    fire = key.sign(firebase_claims())
    assert "FANFUSE_FIREBASE_PROJECT" in refused(
        Unauthorized, fire, lambda t: caller_claims(t, bare, certs=cache)
    )
    goog = key.sign(claims(GOOGLE_ISSUER, AUDIENCE))
    assert "FANFUSE_ID_TOKEN_AUDIENCES" in refused(
        Unauthorized, goog, lambda t: caller_claims(t, bare, certs=cache)
    )


def test_keys_published_as_a_jwk_set_verify_too(
    key: SigningKey, google: KeySet, settings: Settings, cache: CertCache
) -> None:
    google.publish(key, jwk=True)
    token = key.sign(claims(GOOGLE_ISSUER, AUDIENCE, sub="jwk-user"))
    assert caller_claims(token, settings, certs=cache)["sub"] == "jwk-user"


def test_unreachable_keys_are_unavailable_not_the_callers_fault(
    key: SigningKey, settings: Settings, server: HTTPServer, cache: CertCache
) -> None:
    gone = settings.model_copy(update={"firebase_certs_url": server.url_for("/no-such-certs")})
    token = key.sign(firebase_claims())
    message = refused(Unavailable, token, lambda t: caller_claims(t, gone, certs=cache))
    assert message.startswith("the Firebase ID token signing keys are unavailable")


# -- the certificate cache ---------------------------------------------------------------------


def test_key_sets_are_fetched_once_for_many_concurrent_verifications(
    key: SigningKey, settings: Settings, google: KeySet, firebase: KeySet
) -> None:
    cache = CertCache()
    tokens = [key.sign(firebase_claims(sub=f"u{i}")) for i in range(40)]
    start = threading.Barrier(8)

    def verify(token: str) -> str:
        if token in tokens[:8]:
            start.wait(timeout=10)  # the first eight all miss the empty cache at once
        return str(caller_claims(token, settings, certs=cache)["sub"])

    with ThreadPoolExecutor(max_workers=8) as pool:
        subjects = list(pool.map(verify, tokens))
    assert subjects == [f"u{i}" for i in range(40)]
    assert firebase.hits == 1 and google.hits == 0


def test_the_default_cache_serves_the_module_functions(
    key: SigningKey, settings: Settings, firebase: KeySet
) -> None:
    certs_module.CERTS.clear()
    try:
        for _ in range(3):
            caller_claims(key.sign(firebase_claims()), settings)
    finally:
        certs_module.CERTS.clear()
    assert firebase.hits == 1


def test_an_unknown_kid_refetches_once_so_a_rotated_key_is_taken(
    key: SigningKey, other: SigningKey, settings: Settings, firebase: KeySet, clock: Clock
) -> None:
    cache = CertCache(clock=clock)
    caller_claims(key.sign(firebase_claims()), settings, certs=cache)
    firebase.publish(key, other)  # the issuer publishes its next key
    rotated = other.sign(firebase_claims(sub="after-rotation"))
    clock.now += 1  # too soon after the last fetch: no fetch, refused
    refused(Unauthorized, rotated, lambda t: caller_claims(t, settings, certs=cache))
    assert firebase.hits == 1
    clock.now += MIN_INTERVAL
    assert caller_claims(rotated, settings, certs=cache)["sub"] == "after-rotation"
    assert firebase.hits == 2
    # A made-up kid right after costs no fetch: forged kids cannot make requests into fetches.
    forged = other.sign(firebase_claims(), kid="made-up")
    for _ in range(5):
        refused(Unauthorized, forged, lambda t: caller_claims(t, settings, certs=cache))
    assert firebase.hits == 2


def test_a_key_set_is_kept_for_its_max_age(
    key: SigningKey, settings: Settings, firebase: KeySet, clock: Clock
) -> None:
    firebase.publish(key, max_age=120)
    cache = CertCache(clock=clock)
    token = key.sign(firebase_claims())
    caller_claims(token, settings, certs=cache)
    clock.now += 119
    caller_claims(token, settings, certs=cache)
    assert firebase.hits == 1
    clock.now += 2
    caller_claims(token, settings, certs=cache)
    assert firebase.hits == 2


def test_cache_seconds_honours_max_age_within_bounds() -> None:
    assert cache_seconds("public, max-age=19204, must-revalidate, no-transform") == MAX_AGE
    assert cache_seconds("max-age=600") == 600
    assert cache_seconds("no-cache, max-age=0") == MIN_INTERVAL
    assert cache_seconds(None) == cache_seconds("no-store") == certs_module.DEFAULT_AGE


def test_key_sets_in_neither_format_are_unreadable(key: SigningKey) -> None:
    assert keys_of({"k1": key.cert_pem}) == {"k1": key.cert_pem}
    assert set(keys_of({"keys": [key.jwk(), {"kty": "EC", "kid": "ec"}]})) == {"k1"}
    unreadable: list[object] = [[], {"k1": 1}, "x", {"keys": [{**key.jwk(), "n": 5}]}]
    for document in unreadable:
        with pytest.raises(certs_module.CertsUnavailable):
            keys_of(document)


# -- Cloud Tasks' OIDC tokens ------------------------------------------------------------------


def task_token(key: SigningKey, **extra: Any) -> str:
    return key.sign({**claims(GOOGLE_ISSUER, TARGET, email=SA, email_verified=True), **extra})


def test_a_task_token_of_the_tasks_service_account_verifies(
    key: SigningKey, settings: Settings, cache: CertCache
) -> None:
    assert task_claims(task_token(key), TARGET, settings, certs=cache)["email"] == SA


@pytest.mark.parametrize(
    "extra",
    [
        {"email": "someone@demo-fanfuse.iam.gserviceaccount.com"},
        {"email_verified": False},
        {"email_verified": "true"},
    ],
)
def test_a_verified_task_token_of_another_account_is_forbidden(
    key: SigningKey, settings: Settings, cache: CertCache, extra: dict[str, Any]
) -> None:
    token = task_token(key, **extra)
    message = refused(Forbidden, token, lambda t: task_claims(t, TARGET, settings, certs=cache))
    assert message == "task token refused: it was not issued to the tasks service account"


def test_task_tokens_that_do_not_verify_are_unauthorized(
    key: SigningKey, other: SigningKey, settings: Settings, cache: CertCache
) -> None:
    def check(token: str) -> object:
        return task_claims(token, TARGET, settings, certs=cache)

    assert "audience" in refused(Unauthorized, task_token(key, aud=TARGET + "/other"), check)
    assert "signature" in refused(Unauthorized, other.sign(claims(GOOGLE_ISSUER, TARGET,
        email=SA, email_verified=True), kid=key.kid), check)  # fmt: skip
    assert "issuer" in refused(Unauthorized, key.sign(firebase_claims(aud=TARGET)), check)
    nobody = settings.model_copy(update={"tasks_service_account": None})
    assert "FANFUSE_TASKS_SERVICE_ACCOUNT" in refused(
        Forbidden, task_token(key), lambda t: task_claims(t, TARGET, nobody, certs=cache)
    )


def test_bearer_takes_the_token_of_an_authorization_header() -> None:
    assert bearer("Bearer abc.def.ghi") == "abc.def.ghi"
    assert bearer("bearer  abc ") == "abc"
    for header in (None, "", "Bearer", "Bearer ", "Basic abc", "abc"):
        assert bearer(header) is None


# -- whose tokens: principals, sign-in providers, anonymous users ------------------------------


def test_a_google_token_is_accepted_only_from_a_listed_principal(
    key: SigningKey, settings: Settings, cache: CertCache
) -> None:
    def check(token: str) -> dict[str, Any]:
        return caller_claims(token, settings, certs=cache)

    listed = key.sign(
        claims(GOOGLE_ISSUER, AUDIENCE, sub="9", email=CALLER_SA, email_verified=True)
    )
    assert check(listed)["sub"] == "9"
    assert caller_subject(check(listed)) == "google:9"
    # Any service account of any project can mint a token for our audience: not enough.
    stranger = claims(GOOGLE_ISSUER, AUDIENCE, sub="666", email="x@evil.iam.gserviceaccount.com")
    for token in (
        key.sign({**stranger, "email_verified": True}),
        key.sign(claims(GOOGLE_ISSUER, AUDIENCE, sub="7", email=CALLER_SA)),  # email unverified
        key.sign(claims(GOOGLE_ISSUER, AUDIENCE, sub="7", email=CALLER_SA, email_verified="true")),
    ):
        assert "FANFUSE_ID_TOKEN_PRINCIPALS" in refused(Forbidden, token, check)
    nobody = settings.model_copy(update={"id_token_principals": []})
    assert "FANFUSE_ID_TOKEN_PRINCIPALS" in refused(
        Forbidden, listed, lambda t: caller_claims(t, nobody, certs=cache)
    )


def test_anonymous_firebase_users_are_refused_unless_allowed(
    key: SigningKey, settings: Settings, cache: CertCache
) -> None:
    anonymous = key.sign(firebase_claims(firebase={"sign_in_provider": "anonymous"}))
    message = refused(Forbidden, anonymous, lambda t: caller_claims(t, settings, certs=cache))
    assert "anonymous users may not call (FANFUSE_FIREBASE_ALLOW_ANONYMOUS)" in message
    allowing = settings.model_copy(update={"firebase_allow_anonymous": True})
    assert caller_subject(caller_claims(anonymous, allowing, certs=cache)) == "firebase:user-1"
    for bad in ({}, {"firebase": "password"}, {"firebase": {"sign_in_provider": 3}}):
        token = key.sign({**firebase_claims(), "firebase": None, **bad})
        message = refused(Forbidden, token, lambda t: caller_claims(t, allowing, certs=cache))
        assert "names no sign-in provider" in message


def test_firebase_sign_in_providers_are_an_allow_list(
    key: SigningKey, settings: Settings, cache: CertCache
) -> None:
    only_google = settings.model_copy(update={"firebase_sign_in_providers": ["google.com"]})

    def check(token: str) -> object:
        return caller_claims(token, only_google, certs=cache)

    assert check(key.sign(firebase_claims(firebase={"sign_in_provider": "google.com"})))
    password = key.sign(firebase_claims())
    assert "sign-in provider 'password' is not accepted" in refused(Forbidden, password, check)
    custom = key.sign(firebase_claims(firebase={"sign_in_provider": "custom"}))
    assert "FANFUSE_FIREBASE_SIGN_IN_PROVIDERS" in refused(Forbidden, custom, check)
    assert caller_claims(password, settings, certs=cache)  # None (the default): any but anonymous


# -- malformed tokens: always a 401, whatever the bytes ----------------------------------------


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


MALFORMED_TOKENS = {
    "a header of 1,500 nested [": f"{b64(b'[' * 1500)}.{b64(b'{}')}.c2ln",
    "claims of 1,500 nested [": f"{b64(b'{}')}.{b64(b'[' * 1500)}.c2ln",
    "1,500 [ as the token": "[" * 1500,
    "a non-JSON header": f"{b64(b'not json')}.{b64(b'{}')}.c2ln",
    "a header that is a JSON list": f"{b64(b'[]')}.{b64(b'{}')}.c2ln",
    "claims that are a JSON list": f"{b64(b'{}')}.{b64(b'[1]')}.c2ln",
    "a header of invalid UTF-8": f"{b64(bytes([0xFF, 0xFE]))}.{b64(b'{}')}.c2ln",
    "a huge integer in the header": b64(b'{"alg": ' + b"9" * 5000 + b"}") + ".e30.c2ln",
    "random bytes": b64(bytes(random.Random(7).randrange(256) for _ in range(600))),
    "non-ASCII": "é.é.é",
    "too long": "a" * 20_000 + ".e30.c2ln",
    "four parts": "e30.e30.e30.e30",
}


@pytest.mark.parametrize("name", MALFORMED_TOKENS)
def test_a_malformed_token_is_a_401_never_an_exception(
    settings: Settings, cache: CertCache, name: str
) -> None:
    token = MALFORMED_TOKENS[name]
    message = refused(Unauthorized, token, lambda t: caller_claims(t, settings, certs=cache))
    assert "not a well-formed JWT" in message or "neither Firebase nor Google" in message
    with pytest.raises(Unauthorized):
        task_claims(token, TARGET, settings, certs=cache)


# -- key sets: bounded refetches after a failure, the last good set served ---------------------


def test_a_failing_key_set_endpoint_costs_one_fetch_per_retry_interval_and_the_last_set_serves(
    key: SigningKey, settings: Settings, firebase: KeySet, clock: Clock
) -> None:
    """100 verifications over 100 s while the issuer's endpoint answers 500: a handful of
    fetches (one per RETRY_INTERVAL), and every valid token still verifies with the stale set."""
    firebase.publish(key, max_age=60)
    cache = CertCache(clock=clock)
    token = key.sign(firebase_claims())
    caller_claims(token, settings, certs=cache)
    firebase.failing = 500
    clock.now += 61  # the set is stale now
    for _ in range(100):
        assert caller_claims(token, settings, certs=cache)["sub"] == "user-1"
        clock.now += 1
    assert firebase.hits == 1 + math.ceil(100 / RETRY_INTERVAL)
    firebase.failing = None
    clock.now += RETRY_INTERVAL
    caller_claims(token, settings, certs=cache)  # recovered: fresh again, no more fetches
    caller_claims(token, settings, certs=cache)
    assert firebase.hits == 2 + math.ceil(100 / RETRY_INTERVAL)


def test_unknown_kids_against_a_failing_endpoint_do_not_turn_into_fetches(
    key: SigningKey, settings: Settings, firebase: KeySet, clock: Clock
) -> None:
    firebase.publish(key, max_age=3600)
    cache = CertCache(clock=clock)
    caller_claims(key.sign(firebase_claims()), settings, certs=cache)
    firebase.failing = 503
    for i in range(100):
        clock.now += 1
        forged = key.sign(firebase_claims(), kid=f"made-up-{i}")
        refused(Unauthorized, forged, lambda t: caller_claims(t, settings, certs=cache))
    # first miss at +10 s may fetch, then one per RETRY_INTERVAL after the failure
    assert firebase.hits <= 1 + 1 + math.ceil(100 / RETRY_INTERVAL)


def test_no_set_held_and_the_endpoint_failing_is_unavailable_without_a_fetch_per_request(
    key: SigningKey, settings: Settings, firebase: KeySet, clock: Clock
) -> None:
    firebase.failing = 500
    cache = CertCache(clock=clock)
    token = key.sign(firebase_claims())
    for _ in range(50):
        refused(Unavailable, token, lambda t: caller_claims(t, settings, certs=cache))
    assert firebase.hits == 1
    clock.now += RETRY_INTERVAL
    firebase.failing = None
    assert caller_claims(token, settings, certs=cache)["sub"] == "user-1"
    assert firebase.hits == 2


def test_a_stale_set_stops_verifying_after_max_stale(
    key: SigningKey, settings: Settings, firebase: KeySet, clock: Clock
) -> None:
    firebase.publish(key, max_age=60)
    cache = CertCache(clock=clock)
    token = key.sign(firebase_claims())
    caller_claims(token, settings, certs=cache)
    firebase.failing = 500
    clock.now += 60 + MAX_STALE - 1
    assert caller_claims(token, settings, certs=cache)
    clock.now += RETRY_INTERVAL
    refused(Unavailable, token, lambda t: caller_claims(t, settings, certs=cache))


# -- the Firebase emulators' unsigned tokens ---------------------------------------------------


def emulator_token(**extra: Any) -> str:
    """What the Firestore emulator's `mockUserToken` (and the Auth emulator) hand an app: an
    unsigned Firebase ID token, its third part empty."""
    header = {"alg": "none", "typ": "JWT"}
    body = firebase_claims(sub="alice", firebase={"sign_in_provider": "custom", "identities": {}})
    parts = [header, {**body, **extra}]
    return (
        ".".join(
            base64.urlsafe_b64encode(json.dumps(p).encode()).rstrip(b"=").decode() for p in parts
        )
        + "."
    )


def test_emulator_tokens_are_accepted_only_where_a_demo_project_says_so(
    settings: Settings, cache: CertCache
) -> None:
    token = emulator_token()
    assert "RS256" in refused(
        Unauthorized, token, lambda t: caller_claims(t, settings, certs=cache)
    )
    local = settings.model_copy(update=BESIDE_AN_EMULATOR)
    verified = caller_claims(token, local, certs=cache)
    assert caller_subject(verified) == "firebase:alice"


@pytest.mark.parametrize(
    ("extra", "signature", "why"),
    [
        ({}, "c2ln", "carries no signature"),
        ({"exp": 1_000}, "", "expired"),
        ({"aud": "demo-other"}, "", "audience"),
        ({"iss": "https://securetoken.google.com/demo-other"}, "", "issuer"),
        ({"auth_time": None}, "", "auth_time"),
        ({"firebase": {"sign_in_provider": "anonymous"}}, "", "anonymous"),
    ],
)
def test_emulator_tokens_must_carry_every_claim_a_signed_one_does(
    settings: Settings, cache: CertCache, extra: dict[str, Any], signature: str, why: str
) -> None:
    local = settings.model_copy(update=BESIDE_AN_EMULATOR)
    token = emulator_token(**extra) + signature
    error = Forbidden if why == "anonymous" else Unauthorized
    assert why in refused(error, token, lambda t: caller_claims(t, local, certs=cache))


BESIDE_AN_EMULATOR = {"firebase_emulator_tokens": True, "auth_emulator_host": "127.0.0.1:9099"}
"""Emulator tokens on, in a process that signs its users in with the Auth emulator."""


@pytest.mark.parametrize(
    "environment",
    [
        {"K_SERVICE": "start-search"},  # Cloud Run, and Cloud Functions on it
        {"AWS_LAMBDA_FUNCTION_NAME": "fanfuse-http"},  # Lambda
    ],
)
def test_emulator_tokens_are_refused_on_a_cloud_runtime_whatever_the_project(
    settings: Settings,
    cache: CertCache,
    monkeypatch: pytest.MonkeyPatch,
    environment: dict[str, str],
) -> None:
    """Issue 29, item 6: `FANFUSE_FIREBASE_PROJECT=demo-prod` with emulator tokens on, on a
    cloud runtime, and an emulator host set too: an unsigned token is no user."""
    for name, value in {**environment, "FIRESTORE_EMULATOR_HOST": "127.0.0.1:8080"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("FANFUSE_FIREBASE_PROJECT", "demo-prod")
    monkeypatch.setenv("FANFUSE_FIREBASE_EMULATOR_TOKENS", "true")
    monkeypatch.setenv("FANFUSE_FIREBASE_CERTS_URL", settings.firebase_certs_url)
    deployed = Settings()
    token = emulator_token(aud="demo-prod", iss="https://securetoken.google.com/demo-prod")
    assert "RS256" in refused(
        Unauthorized, token, lambda t: caller_claims(t, deployed, certs=cache)
    )


def test_emulator_tokens_are_refused_where_no_emulator_is_set(
    settings: Settings, cache: CertCache
) -> None:
    """No Auth emulator host and no Firestore emulator host: nothing here could have issued an
    unsigned token, so none is accepted, even on a `demo-` project with the setting on."""
    token = emulator_token()
    alone = settings.model_copy(update={"firebase_emulator_tokens": True})
    assert "RS256" in refused(Unauthorized, token, lambda t: caller_claims(t, alone, certs=cache))
    for host in ({"auth_emulator_host": "127.0.0.1:9099"}, {"firestore_emulator_host": "h:1"}):
        beside = alone.model_copy(update=host)
        assert caller_subject(caller_claims(token, beside, certs=cache)) == "firebase:alice"


def test_the_emulator_token_problem_names_what_is_missing(settings: Settings) -> None:
    on = settings.model_copy(update=BESIDE_AN_EMULATOR)
    assert tokens.emulator_tokens_problem(on) is None
    assert tokens.emulator_tokens_problem(settings) == "FANFUSE_FIREBASE_EMULATOR_TOKENS is off"
    cloud = on.model_copy(update={"cloud_runtime": "fanfuse-http"})
    assert "cloud runtime" in (tokens.emulator_tokens_problem(cloud) or "")
    alone = on.model_copy(update={"auth_emulator_host": None})
    assert tokens.emulator_tokens_problem(alone) == (
        "no emulator is set (FIREBASE_AUTH_EMULATOR_HOST, FIRESTORE_EMULATOR_HOST)"
    )


def test_emulator_tokens_are_legal_only_for_a_demo_project() -> None:
    """A project that could hold real users never accepts unsigned tokens: the setting is
    refused at start, naming what is wrong."""
    for project in (None, "my-real-project", "fanfuse-demo"):
        with pytest.raises(ValidationError, match="FANFUSE_FIREBASE_EMULATOR_TOKENS"):
            Settings(firebase_project=project, firebase_emulator_tokens=True)
    assert Settings(firebase_project="demo-app", firebase_emulator_tokens=True)
