"""infra/firestore.rules on the Firestore emulator: an owner reads, nobody else does, nobody writes.

Calls go through the emulator's REST API as a client would: `Authorization: Bearer <unsigned JWT>`
(the emulator accepts alg "none" tokens and takes uid from `sub`/`user_id`). `Bearer owner` is the
emulator's admin, used only to seed documents; the functions' server clients bypass rules too.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fanfuse.tools.devstack.firestore_emulator import FirestoreEmulator
from fanfuse.tools.devstack.processes import http_request

RULES = Path(__file__).resolve().parents[2] / "infra" / "firestore.rules"
PROJECT = "demo-fanfuse-rules"
ADMIN = "owner"


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def token(uid: str, project: str = PROJECT) -> str:
    """An unsigned Firebase ID token for `uid`, as the emulator accepts it (and `fanfuse dev
    --app-origin`'s functions: tests/integration/test_devstack.py)."""
    claims = {
        "sub": uid,
        "user_id": uid,
        "aud": project,
        "iss": f"https://securetoken.google.com/{project}",
        "iat": 1_700_000_000,
        "exp": 4_100_000_000,
        "auth_time": 1_700_000_000,
        "firebase": {"sign_in_provider": "custom", "identities": {}},
    }
    return f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}."


def owner_filter(owner: str) -> dict[str, Any]:
    return {
        "fieldFilter": {
            "field": {"fieldPath": "owner"},
            "op": "EQUAL",
            "value": {"stringValue": owner},
        }
    }


class Client:
    """Firestore REST as one caller: admin, a signed-in user, or anonymous (bearer None)."""

    def __init__(self, emulator: FirestoreEmulator, bearer: str | None) -> None:
        self.base = f"{emulator.url}/v1/projects/{PROJECT}/databases/(default)/documents"
        self.headers = {"Content-Type": "application/json"}
        if bearer is not None:
            self.headers["Authorization"] = f"Bearer {bearer}"

    def get(self, path: str) -> int:
        return http_request("GET", f"{self.base}/{path}", headers=self.headers)[0]

    def patch(self, path: str, fields: dict[str, str]) -> int:
        body = {"fields": {k: {"stringValue": v} for k, v in fields.items()}}
        payload = json.dumps(body).encode()
        return http_request("PATCH", f"{self.base}/{path}", payload, self.headers)[0]

    def create(self, collection: str, doc_id: str, fields: dict[str, str]) -> int:
        body = json.dumps({"fields": {k: {"stringValue": v} for k, v in fields.items()}}).encode()
        url = f"{self.base}/{collection}?documentId={doc_id}"
        return http_request("POST", url, body, self.headers)[0]

    def delete(self, path: str) -> int:
        return http_request("DELETE", f"{self.base}/{path}", headers=self.headers)[0]

    def list_collection(self, collection: str) -> int:
        return http_request("GET", f"{self.base}/{collection}", headers=self.headers)[0]

    def query(self, collection_id: str, owner: str) -> int:
        """runQuery over a collection group, filtered on `owner`: its status."""
        query = {
            "from": [{"collectionId": collection_id, "allDescendants": True}],
            "where": owner_filter(owner),
        }
        payload = json.dumps({"structuredQuery": query}).encode()
        return http_request("POST", f"{self.base}:runQuery", payload, self.headers)[0]

    def query_owner(self, owner: str | None) -> tuple[int, list[str]]:
        """runQuery over searches, filtered on owner when given; (status, document names)."""
        query: dict[str, Any] = {"from": [{"collectionId": "searches"}]}
        if owner is not None:
            query["where"] = owner_filter(owner)
        payload = json.dumps({"structuredQuery": query}).encode()
        status, body = http_request("POST", f"{self.base}:runQuery", payload, self.headers)
        if status != 200:
            return status, []
        rows = json.loads(body)
        return status, sorted(
            r["document"]["name"].rsplit("/", 1)[-1] for r in rows if "document" in r
        )


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FirestoreEmulator]:
    with FirestoreEmulator(PROJECT, log_dir=tmp_path_factory.mktemp("firestore-rules")) as em:
        em.load_rules(RULES.read_text())
        admin = Client(em, ADMIN)
        for task_id, owner in OWNED:
            assert admin.patch(f"searches/{task_id}", {"owner": owner, "status": "running"}) == 200
            assert admin.patch(f"searches/{task_id}/platforms/docs", {"state": "running"}) == 200
            assert admin.patch(f"searches/{task_id}/contents/r1", {"content": "text"}) == 200
        assert admin.patch("other/x", {"a": "b"}) == 200
        for path in SERVER_ONLY:  # each claims alice as owner: that opens nothing
            assert admin.patch(path, {"owner": "firebase:alice", "secret_sha256": "0" * 64}) == 200
        yield em


OWNED = [
    ("t-alice", "firebase:alice"),
    ("t-bob", "firebase:bob"),
    ("t-key-alice", "key:alice"),  # `fanfuse keys create --owner alice`: not the Firebase alice
    ("t-google-alice", "google:alice"),
    ("t-bare-alice", "alice"),  # stored before owners were namespaced: nobody's now
]
DOCS = ["searches/t-alice", "searches/t-alice/platforms/docs", "searches/t-alice/contents/r1"]
NOT_HERS = [
    f"searches/{task_id}{sub}"
    for task_id in ("t-key-alice", "t-google-alice", "t-bare-alice")
    for sub in ("", "/platforms/docs", "/contents/r1")
]
SERVER_ONLY = [
    "searches_keys/0123456789abcdef",
    "searches_quota/alice",
    "searches_quota/alice/windows/w1",
    "searches_cache/c1",
    "searches_health/docs",
]
"""The functions' own collections (`{collection}_keys`, `_quota`, `_cache`, `_health`)."""


@pytest.mark.parametrize("path", DOCS)
def test_the_owner_reads_their_search_and_its_subdocuments(
    emulator: FirestoreEmulator, path: str
) -> None:
    assert Client(emulator, token("alice")).get(path) == 200


@pytest.mark.parametrize("path", DOCS)
def test_another_user_cannot_read(emulator: FirestoreEmulator, path: str) -> None:
    assert Client(emulator, token("bob")).get(path) == 403


@pytest.mark.parametrize("path", NOT_HERS)
def test_a_search_another_kind_of_credential_started_is_not_the_firebase_users(
    emulator: FirestoreEmulator, path: str
) -> None:
    """Owner `key:alice`, `google:alice` or a bare `alice`: not readable with uid alice."""
    assert Client(emulator, token("alice")).get(path) == 403


@pytest.mark.parametrize("path", DOCS)
def test_an_anonymous_caller_cannot_read(emulator: FirestoreEmulator, path: str) -> None:
    assert Client(emulator, None).get(path) == 403


def test_a_user_lists_only_their_own_searches(emulator: FirestoreEmulator) -> None:
    alice = Client(emulator, token("alice"))
    assert alice.query_owner("firebase:alice") == (200, ["t-alice"])
    assert alice.query_owner("firebase:bob")[0] == 403
    assert alice.query_owner("alice")[0] == 403
    assert alice.query_owner("key:alice")[0] == 403
    assert alice.query_owner(None)[0] == 403


def test_other_collections_are_closed(emulator: FirestoreEmulator) -> None:
    assert Client(emulator, token("alice")).get("other/x") == 403


@pytest.mark.parametrize("uid", ["alice", "bob", None], ids=["owner", "other", "anonymous"])
@pytest.mark.parametrize("path", SERVER_ONLY)
def test_the_functions_own_collections_are_closed_to_every_client(
    emulator: FirestoreEmulator, path: str, uid: str | None
) -> None:
    """Keys, quotas, cache and health: no read, no list, no write, even for the `owner` a
    document names."""
    client = Client(emulator, token(uid) if uid else None)
    collection, _, doc_id = path.rpartition("/")
    assert client.get(path) == 403
    assert client.list_collection(collection) == 403
    claimed = f"firebase:{uid or 'nobody'}"
    assert client.query(collection.rpartition("/")[2], "firebase:alice") == 403
    assert client.patch(path, {"owner": claimed}) == 403
    assert client.create(collection, f"new-{doc_id}", {"owner": claimed}) == 403
    assert client.delete(path) == 403
    assert Client(emulator, ADMIN).get(path) == 200  # still there, as seeded


@pytest.mark.parametrize("uid", ["alice", "bob", None], ids=["owner", "other", "anonymous"])
def test_no_client_writes_anything(emulator: FirestoreEmulator, uid: str | None) -> None:
    client = Client(emulator, token(uid) if uid else None)
    me = uid or "nobody"
    for path in DOCS:
        assert client.patch(path, {"owner": f"firebase:{me}", "status": "completed"}) == 403, path
        assert client.delete(path) == 403, path
    # New documents, even ones that claim the caller as owner.
    assert client.create("searches", f"new-{me}", {"owner": f"firebase:{me}"}) == 403
    assert client.create("searches/t-alice/platforms", "new", {"state": "queued"}) == 403
    assert client.create("searches/t-alice/contents", "new", {"content": "x"}) == 403
    assert client.patch(f"searches/t-{me}/platforms/web", {"state": "succeeded"}) == 403
    # Nothing changed: the admin still sees the seeded values.
    admin = Client(emulator, ADMIN)
    status, body = http_request("GET", f"{admin.base}/searches/t-alice", headers=admin.headers)
    assert status == 200
    assert json.loads(body)["fields"]["status"]["stringValue"] == "running"
