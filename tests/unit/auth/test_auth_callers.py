"""API keys (`fanfuse.auth.keys`) and the one caller decision (`fanfuse.auth.callers`), on a real
SQLite store; the ID-token verification is replaced by a double of `tokens.caller_claims` (its
own tests verify real tokens)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.datastructures import Headers as StarletteHeaders
from werkzeug.datastructures import Headers as WerkzeugHeaders

from fanfuse.auth import callers, keys, tokens
from fanfuse.auth.callers import Authenticator, visible
from fanfuse.http.api import error_answer
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.errors import Forbidden, TaskNotFound, Unauthorized
from fanfuse.wire.models import ApiKey, Caller, TaskView, utcnow
from tests.support.fakes import task_view
from tests.support.optional import present

KEY = keys.API_KEY_HEADER
USERINFO = callers.USERINFO_HEADER
FIREBASE = "https://securetoken.google.com/demo-fanfuse"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CountingStore(SqliteStore):
    """The SQLite store, counting key reads (what the cache saves)."""

    reads = 0

    def get_key(self, key_id: str) -> ApiKey | None:
        self.reads += 1
        return super().get_key(key_id)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CountingStore]:
    s = CountingStore(tmp_path / "keys.db")
    yield s
    s.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def authenticator(store: SqliteStore, clock: Clock | None = None, **settings: Any) -> Authenticator:
    return Authenticator(Settings(db_path=store.path, **settings), store, clock=clock or Clock())


def issue(store: SqliteStore, owner: str = "alice", **limits: int) -> tuple[str, ApiKey]:
    plaintext, record = keys.new_key(
        owner, "test", limits.get("rate"), limits.get("in_flight"), utcnow()
    )
    store.put_key(record)
    return plaintext, record


def userinfo(claims: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")


def claims_double(monkeypatch: pytest.MonkeyPatch, answer: dict[str, Any] | Exception) -> list[str]:
    """Replace the token verification; returns the tokens it was asked about."""
    seen: list[str] = []

    def caller_claims(token: str, settings: Settings) -> dict[str, Any]:
        seen.append(token)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(tokens, "caller_claims", caller_claims)
    return seen


# -- keys ------------------------------------------------------------------------------------


def test_a_new_key_parses_back_and_only_its_hash_is_stored() -> None:
    now = utcnow()
    plaintext, record = keys.new_key("alice", "laptop", 12, 3, now)
    assert keys.KEY.match(plaintext)
    key_id, secret = keys.parse_key(f"  {plaintext}\n") or ("", "")
    assert key_id == record.key_id and keys.KEY_ID.match(key_id)
    assert record.secret_sha256 == keys.digest(secret) != secret
    assert secret not in record.model_dump_json() and plaintext not in record.model_dump_json()
    assert (record.owner, record.label, record.rate_per_minute, record.max_in_flight) == (
        "alice",
        "laptop",
        12,
        3,
    )
    assert record.created_at == now and record.revoked_at is None
    assert keys.matches(record, secret) and not keys.matches(record, secret[:-1] + "x")
    other, _ = keys.new_key("alice", "", None, None, now)
    assert other != plaintext


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ff_",
        "ff_0123456789abcdef_",
        "xx_0123456789abcdef_" + "a" * 43,
        "ff_0123456789ABCDEF_" + "a" * 43,  # ids are lower-case hex
        "ff_0123456789abcde_" + "a" * 43,
        "ff_0123456789abcdef_" + "a" * 42,
        "ff_0123456789abcdef_" + "a" * 43 + "_x",
        "ff_0123456789abcdef_" + "a" * 42 + "!",
    ],
)
def test_anything_but_a_well_formed_key_does_not_parse(text: str) -> None:
    assert keys.parse_key(text) is None


def test_revoking_keeps_the_first_revocation_time() -> None:
    _, record = keys.new_key("alice", "", None, None, utcnow())
    first = keys.revoked(record, utcnow())
    assert first.revoked_at is not None and record.revoked_at is None
    assert keys.revoked(first, utcnow() + timedelta(hours=1)) == first


def test_the_sqlite_store_keeps_keys(store: CountingStore) -> None:
    _, second = keys.new_key("bob", "", None, None, utcnow() + timedelta(seconds=1))
    _, first = issue(store)
    store.put_key(second)
    assert store.get_key(first.key_id) == first and store.get_key("0" * 16) is None
    assert [k.key_id for k in store.list_keys()] == [first.key_id, second.key_id]  # oldest first
    store.put_key(keys.revoked(first, utcnow()))
    assert present(store.get_key(first.key_id)).revoked_at is not None
    assert len(store.list_keys()) == 2


# -- API keys --------------------------------------------------------------------------------


def test_a_valid_key_is_its_owner_with_its_limits(store: CountingStore) -> None:
    plaintext, record = issue(store, "alice", rate=5, in_flight=2)
    caller = authenticator(store).caller({KEY: plaintext})
    assert caller == Caller(
        subject="key:alice", via="api_key", key_id=record.key_id, rate_per_minute=5, max_in_flight=2
    )


def test_garbled_unknown_and_wrong_keys_get_one_401_that_quotes_nothing(
    store: CountingStore,
) -> None:
    plaintext, _ = issue(store)
    key_id, secret = keys.parse_key(plaintext) or ("", "")
    unknown, _ = keys.new_key("x", "", None, None, utcnow())  # never stored
    wrong = f"ff_{key_id}_{secret[::-1]}"
    auth = authenticator(store)
    for sent in ("", "nonsense", plaintext + "x", unknown, wrong):
        with pytest.raises(Unauthorized) as caught:
            auth.caller({KEY: sent})
        assert str(caught.value) == callers.BAD_KEY  # one message, quoting nothing sent
    answer = error_answer(caught.value)
    assert answer.status == 401 and "WWW-Authenticate" in answer.headers
    assert answer.body["error"] == "unauthorized"


def test_a_revoked_key_is_403_but_only_for_the_right_secret(store: CountingStore) -> None:
    plaintext, record = issue(store)
    store.put_key(keys.revoked(record, utcnow()))
    key_id, secret = keys.parse_key(plaintext) or ("", "")
    auth = authenticator(store)
    with pytest.raises(Forbidden, match=f"API key {record.key_id} was revoked"):
        auth.caller({KEY: plaintext})
    with pytest.raises(Unauthorized):
        auth.caller({KEY: f"ff_{key_id}_{secret[::-1]}"})


def test_headers_are_found_whatever_their_case(store: CountingStore) -> None:
    plaintext, _ = issue(store)
    auth = authenticator(store)
    for headers in (
        WerkzeugHeaders([("x-api-key", plaintext)]),
        StarletteHeaders({"X-API-KEY": plaintext}),
    ):
        caller = auth.caller(headers)
        assert caller is not None and caller.subject == "key:alice"


# -- the key cache ---------------------------------------------------------------------------


def test_a_key_read_is_reused_for_the_cache_time_then_a_revocation_holds(
    store: CountingStore, clock: Clock
) -> None:
    plaintext, record = issue(store)
    auth = authenticator(store, clock)
    for _ in range(3):
        auth.caller({KEY: plaintext})
    assert store.reads == 1
    store.put_key(keys.revoked(record, utcnow()))
    clock.now += callers.KEY_CACHE_SECONDS - 1
    assert auth.caller({KEY: plaintext}) is not None  # within the stated bound
    clock.now += 1
    with pytest.raises(Forbidden):
        auth.caller({KEY: plaintext})
    assert store.reads == 2


def test_a_new_key_works_at_once_and_an_id_refused_before_it_existed_within_the_miss_bound(
    store: CountingStore, clock: Clock
) -> None:
    auth = authenticator(store, clock)
    fresh, record = issue(store, "carol")
    assert auth.caller({KEY: fresh}) is not None  # never asked for before: read, found
    plaintext, record = keys.new_key("dave", "", None, None, utcnow())
    with pytest.raises(Unauthorized):
        auth.caller({KEY: plaintext})
    store.put_key(record)  # its id was asked for before it existed (ids are random: a test's)
    clock.now += callers.KEY_MISS_SECONDS
    assert auth.caller({KEY: plaintext}) is not None


def test_an_unknown_key_id_costs_one_store_read_per_miss_interval(
    store: CountingStore, clock: Clock
) -> None:
    """Issue 29, item 8: every request with a well-formed random key read the store (one
    billed read on Firestore or DynamoDB) before any rate limit could apply. A repeated
    unknown id is now answered from memory for KEY_MISS_SECONDS, with the same 401."""
    forged, _ = keys.new_key("nobody", "", None, None, utcnow())
    auth = authenticator(store, clock)
    for _ in range(100):
        with pytest.raises(Unauthorized, match="not a valid API key"):
            auth.caller({KEY: forged})
    assert store.reads == 1
    clock.now += callers.KEY_MISS_SECONDS - 0.5
    with pytest.raises(Unauthorized):
        auth.caller({KEY: forged})
    assert store.reads == 1
    clock.now += 0.5  # the bound passed: asked again
    with pytest.raises(Unauthorized):
        auth.caller({KEY: forged})
    assert store.reads == 2


def test_the_unknown_ids_remembered_are_bounded(
    store: CountingStore, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(callers, "KEY_MISS_SIZE", 2)
    forged = [keys.new_key("nobody", "", None, None, utcnow())[0] for _ in range(3)]
    auth = authenticator(store, clock)
    for plaintext in [*forged, forged[2], forged[1]]:
        with pytest.raises(Unauthorized):
            auth.caller({KEY: plaintext})
    assert store.reads == 3  # the two newest were remembered
    assert len(auth._misses) == 2
    with pytest.raises(Unauthorized):
        auth.caller({KEY: forged[0]})
    assert store.reads == 4  # the oldest was forgotten


def test_the_cache_is_bounded(
    store: CountingStore, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(callers, "KEY_CACHE_SIZE", 2)
    issued = [issue(store, f"owner{i}")[0] for i in range(3)]
    auth = authenticator(store, clock)
    for plaintext in issued:
        auth.caller({KEY: plaintext})
    auth.caller({KEY: issued[2]})
    auth.caller({KEY: issued[1]})
    assert store.reads == 3  # the two newest were cached
    auth.caller({KEY: issued[0]})
    assert store.reads == 4  # the oldest was evicted


def test_no_cache_at_all_reads_every_time(store: CountingStore) -> None:
    plaintext, _ = issue(store)
    auth = Authenticator(Settings(db_path=store.path), store, cache_seconds=0)
    auth.caller({KEY: plaintext})
    auth.caller({KEY: plaintext})
    assert store.reads == 2


# -- the gateway header ----------------------------------------------------------------------


def test_the_gateway_header_is_ignored_unless_the_gateway_is_trusted(store: CountingStore) -> None:
    spoofed = {USERINFO: userinfo({"sub": "alice"})}
    with pytest.raises(Unauthorized, match="no credentials"):
        authenticator(store).caller(spoofed)
    assert authenticator(store, auth_required=False).caller(spoofed) is None
    assert authenticator(store, auth_required=False).caller({USERINFO: "%%%"}) is None


def test_a_trusted_gateway_names_the_caller_by_sub(store: CountingStore) -> None:
    auth = authenticator(store, trust_gateway=True)
    caller = auth.caller({USERINFO: userinfo({"sub": "alice", "email": "a@example.com"})})
    assert caller == Caller(subject="gateway:alice", via="gateway")
    padded = base64.urlsafe_b64encode(json.dumps({"sub": "bob"}).encode()).decode()
    assert auth.caller({USERINFO: padded}) == Caller(subject="gateway:bob", via="gateway")
    for bad in ("%%%", userinfo(["sub"]), userinfo({"sub": ""}), userinfo({"sub": 7}), ""):
        with pytest.raises(Unauthorized, match="not base64url JSON claims with a `sub`"):
            auth.caller({USERINFO: bad})


# -- the IAM principal API Gateway verified (AWS, AWS_IAM routes) -------------------------------

ARN = "arn:aws:iam::123456789012:user/backend"


def iam_context(identity: Any) -> dict[str, Any]:
    """A Lambda event's requestContext (payload format 2.0) behind an AWS_IAM route."""
    return {"accountId": "123456789012", "authorizer": {"iam": identity}}


def test_the_iam_principal_is_the_caller_only_when_the_authorizer_is_trusted(
    store: CountingStore,
) -> None:
    context = iam_context({"accountId": "123456789012", "userArn": ARN, "userId": "AIDAEXAMPLE"})
    trusting = authenticator(store, trust_iam_authorizer=True)
    assert trusting.caller({}, context) == Caller(subject=f"aws:{ARN}", via="iam")
    with pytest.raises(Unauthorized, match="no credentials"):
        authenticator(store).caller({}, context)  # not said to be IAM-authorized: ignored
    assert authenticator(store, auth_required=False).caller({}, context) is None
    with pytest.raises(Unauthorized, match="no credentials"):  # no identity: nothing to trust
        trusting.caller({}, {"authorizer": {"jwt": {"claims": {"sub": "x"}}}})
    for bad in ({}, {"userArn": ""}, {"userArn": 7}, {"userArn": "backend"}):
        with pytest.raises(Unauthorized, match="names no userArn"):
            trusting.caller({}, iam_context(bad))


ROLE = "arn:aws:sts::123456789012:assumed-role/search-app"


def test_sessions_of_one_role_are_one_owner_unless_the_deployment_opts_into_sessions(
    store: CountingStore,
) -> None:
    """Issue 29, item 7: an assumed role's session name is `RoleSessionName`, chosen by
    whoever assumes the role; as the owner, it let one holder of the role read, cancel and
    spend as another session by naming it. The role is the owner; `iam_session_owners` splits
    it by session for a deployment that wants that, knowing it is no boundary."""
    trusting = authenticator(store, trust_iam_authorizer=True)
    worker = iam_context({"userArn": f"{ROLE}/worker-1"})
    impostor = iam_context({"userArn": f"{ROLE}/worker-2"})
    assert trusting.caller({}, worker) == Caller(subject=f"aws:{ROLE}", via="iam")
    assert trusting.caller({}, impostor) == trusting.caller({}, worker)
    other_role = iam_context({"userArn": "arn:aws:sts::123456789012:assumed-role/other/worker-1"})
    assert trusting.caller({}, other_role) != trusting.caller({}, worker)
    assert trusting.caller({}, iam_context({"userArn": ARN})) == Caller(
        subject=f"aws:{ARN}", via="iam"
    )  # a user is its own ARN
    by_session = authenticator(store, trust_iam_authorizer=True, iam_session_owners=True)
    assert by_session.caller({}, worker) == Caller(subject=f"aws:{ROLE}/worker-1", via="iam")
    assert by_session.caller({}, impostor) == Caller(subject=f"aws:{ROLE}/worker-2", via="iam")


@pytest.mark.parametrize(
    ("arn", "owner"),
    [
        (f"{ROLE}/s", ROLE),
        (
            "arn:aws-cn:sts::123456789012:assumed-role/r/s",
            "arn:aws-cn:sts::123456789012:assumed-role/r",
        ),
        (
            "arn:aws:sts::123456789012:federated-user/bob",
            "arn:aws:sts::123456789012:federated-user",
        ),
        (ARN, ARN),
        ("arn:aws:iam::123456789012:root", "arn:aws:iam::123456789012:root"),
        ("arn:aws:iam::123456789012:role/path/r", "arn:aws:iam::123456789012:role/path/r"),
    ],
)
def test_the_iam_owner_is_what_the_credentials_prove(arn: str, owner: str) -> None:
    assert callers.iam_owner(arn) == owner
    assert callers.iam_owner(arn, sessions=True) == arn


@pytest.mark.parametrize("context", [None, "x", [], {"authorizer": None}, {"authorizer": []}])
def test_a_request_context_without_an_iam_block_names_no_identity(context: object) -> None:
    assert callers.iam_identity(context) is None
    assert callers.iam_identity(iam_context({"userArn": ARN})) == {"userArn": ARN}


def test_a_key_wins_over_the_iam_principal_which_wins_over_the_sigv4_authorization(
    store: CountingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = claims_double(monkeypatch, {"sub": "token-user"})
    plaintext, _ = issue(store, "key-owner")
    auth = authenticator(store, trust_iam_authorizer=True)
    context = iam_context({"userArn": ARN})
    signed = {"Authorization": "AWS4-HMAC-SHA256 Credential=AKIA/20260101/us-east-1/execute-api"}
    keyed = auth.caller({KEY: plaintext, **signed}, context)
    assert keyed is not None and keyed.subject == "key:key-owner"
    assert auth.caller(signed, context) == Caller(subject=f"aws:{ARN}", via="iam")
    with pytest.raises(Unauthorized, match="expected `Bearer <ID token>`"):  # untrusted: read
        authenticator(store).caller(signed, context)
    assert seen == []


# -- ID tokens -------------------------------------------------------------------------------


def test_a_bearer_token_is_its_verified_sub(
    store: CountingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = claims_double(monkeypatch, {"sub": "uid-7", "aud": "fanfuse", "iss": FIREBASE})
    auth = authenticator(store)
    assert auth.caller({"Authorization": "Bearer tok.en.x"}) == Caller(
        subject="firebase:uid-7", via="id_token"
    )
    assert auth.caller({"Authorization": "bearer  tok.en.y "}) is not None
    assert seen == ["tok.en.x", "tok.en.y"]


def test_a_token_that_does_not_verify_or_has_no_sub_is_401(
    store: CountingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    claims_double(monkeypatch, Unauthorized("ID token expired"))
    auth = authenticator(store, auth_required=False)  # a credential sent is always checked
    with pytest.raises(Unauthorized, match="ID token expired"):
        auth.caller({"Authorization": "Bearer t"})
    claims_double(monkeypatch, {"aud": "fanfuse"})
    with pytest.raises(Unauthorized, match="no `sub`"):
        auth.caller({"Authorization": "Bearer t"})


@pytest.mark.parametrize("header", ["Basic dXNlcjpwdw==", "Bearer", "Bearer   ", "tok.en"])
def test_authorization_other_than_bearer_is_401(
    store: CountingStore, monkeypatch: pytest.MonkeyPatch, header: str
) -> None:
    seen = claims_double(monkeypatch, {"sub": "x"})
    with pytest.raises(Unauthorized, match="expected `Bearer <ID token>`"):
        authenticator(store).caller({"Authorization": header})
    assert seen == []


# -- which credential, when there are several; none --------------------------------------------


def test_a_key_wins_over_a_token_and_the_gateway(
    store: CountingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = claims_double(monkeypatch, {"sub": "token-user"})
    plaintext, _ = issue(store, "key-owner")
    auth = authenticator(store, trust_gateway=True)
    headers = {
        KEY: plaintext,
        "Authorization": "Bearer t",
        USERINFO: userinfo({"sub": "gateway-user"}),
    }
    caller = auth.caller(headers)
    assert caller is not None and (caller.subject, caller.via) == ("key:key-owner", "api_key")
    with pytest.raises(Unauthorized):  # a bad key is not rescued by the others
        auth.caller({**headers, KEY: "nonsense"})
    assert seen == []


def test_a_trusted_gateway_wins_over_the_bearer_token_it_replaced(
    store: CountingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = claims_double(monkeypatch, {"sub": "gateway-service-account"})
    auth = authenticator(store, trust_gateway=True)
    headers = {"Authorization": "Bearer t", USERINFO: userinfo({"sub": "alice"})}
    assert auth.caller(headers) == Caller(subject="gateway:alice", via="gateway")
    assert seen == []
    untrusting = authenticator(store)
    assert untrusting.caller(headers) == Caller(
        subject="google:gateway-service-account", via="id_token"
    )


def test_no_credential_is_401_naming_both_ways_unless_auth_is_off(store: CountingStore) -> None:
    with pytest.raises(Unauthorized) as caught:
        authenticator(store).caller({})
    message = str(caught.value)
    assert "X-Api-Key" in message and "fanfuse keys create" in message
    assert "Authorization: Bearer" in message
    assert authenticator(store, auth_required=False).caller({}) is None


# -- who sees a search -----------------------------------------------------------------------


def view(owner: str | None) -> TaskView:
    return task_view("t1", owner)


def test_a_search_with_an_owner_exists_only_for_that_owner() -> None:
    alice = Caller(subject="alice", via="api_key")
    bob = Caller(subject="bob", via="id_token")
    assert visible(view("alice"), alice).owner == "alice"
    for stranger in (bob, None):
        with pytest.raises(TaskNotFound, match="no search with task_id 't1'"):
            visible(view("alice"), stranger)
    for anyone in (alice, bob, None):  # an ownerless search is everyone's
        assert visible(view(None), anyone).owner is None


def test_an_iam_principal_sees_its_own_searches_and_no_other_principals() -> None:
    backend = Caller(subject=f"aws:{ARN}", via="iam")
    other = Caller(subject="aws:arn:aws:iam::123456789012:user/other", via="iam")
    same_name = Caller(subject=f"key:{ARN}", via="api_key")  # a key made with --owner <the ARN>
    assert visible(view(f"aws:{ARN}"), backend).owner == f"aws:{ARN}"
    for stranger in (other, same_name, None):
        with pytest.raises(TaskNotFound):
            visible(view(f"aws:{ARN}"), stranger)
    assert "aws" in callers.OWNER_NAMESPACES
