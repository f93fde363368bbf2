"""Secrets never leave, on the cloud path (issue 10, item 5): a full search with keys set, every
refusal an attacker can provoke, then a grep of everything the stack kept or said.

The secrets in play: the stack's API key (its secret part), the tasks' HMAC secret, a provider
API key, a Firebase ID token, and what an attacker sends (a wrong key, a made-up bearer token, a
token signed with a key nobody published). The provider key belongs to two `google` platforms
(`keyed_ok`, `keyed_bad`) on a 127.0.0.1 double that checks the key arrived; `keyed_bad`
answers 400 with the key echoed in its error, as a provider might. They are declared in
FANFUSE_EXTRA_PLATFORMS, whose name says nothing secret, so only the runner's memory of what it
sent and the credential shapes can mask the key, not a secret-named environment variable.

Where the searches run: the stack's own functions log at Python's default level (WARNING);
`deployment` adds a start_search (which also accepts Firebase ID tokens, their keys
served by the double) and a run_platform that log every record at DEBUG, so httpx's request
lines, with the provider's `key=` parameter, are in a log. The stack's queues deliver to them
because that start_search names its run_platform in FANFUSE_FUNCTION_URLS; the stack's aggregate,
search_status and cancel_search do the rest.

What is grepped: every file under the stack's log directory (the five functions, the short-
deadline start_search, the two DEBUG functions, the Firestore and Cloud Tasks emulators), the
Firestore write log, every document of every collection and sub-collection, and every answer
received, headers included: for each secret as sent, URL-encoded and JSON-escaped, whole or cut
to its first or last 16 characters. `test_the_grep_finds_a_planted_secret` shows the grep
reaching each kind of place; with `fanfuse.support.redact`'s masking turned off, the first test
fails (and its grep alone, without the checks that the masks are there, finds the provider key).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest
from google.cloud import firestore
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.auth import keys
from fanfuse.auth.task_deliveries import SIGNATURE_HEADER
from fanfuse.queue.port import queue_id
from fanfuse.store.firestore import KEYS_SUFFIX
from fanfuse.tools.devstack.functions_host import (
    DEFAULT_FUNCTIONS_SOURCE,
    FUNCTION_TARGETS,
    FunctionProcess,
)
from fanfuse.tools.devstack.processes import LOOPBACK, free_port
from fanfuse.wire.models import ApiKey
from tests.support.e2e.cloud import TERMINAL, Cloud, http_client
from tests.support.signing import KeySet, SigningKey, claims, make_key, task_signature

PROVIDER_KEY = "AIzaE2E-provider-canary-" + secrets.token_urlsafe(18)
KEYED = ("keyed_ok", "keyed_bad")
PIECE = 16
"""A leak cut short still shows this many characters of the secret's start or end."""
DEBUG_MAIN = '''"""functions/main.py, every log record at DEBUG on stderr (the process's log)."""
import logging
import runpy
import sys

logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
globals().update({{k: v for k, v in runpy.run_path({main!r}).items() if k[:2] != "__"}})
'''


# -- the grep ----------------------------------------------------------------------------------


def forms(value: str) -> set[str]:
    """How a secret may show: as sent, URL-encoded or JSON-escaped, whole or cut short to its
    first or last PIECE characters."""
    return {
        spelled
        for part in (value, value[:PIECE], value[-PIECE:])
        for spelled in (part, quote(part, safe=""), quote_plus(part), json.dumps(part)[1:-1])
    }


def sightings(texts: Mapping[str, str], hidden: Mapping[str, str]) -> list[str]:
    """Where each secret (`hidden`: what -> value) shows in `texts` (where -> text), with a bit
    of context; the values are made up for the test, so a failure may show them."""
    found = []
    for where, text in texts.items():
        for what, value in hidden.items():
            for form in forms(value):
                at = text.find(form)
                if at >= 0:
                    found.append(f"{what} in {where}: {text[max(at - 120, 0) : at + 80]!r}")
                    break
    return found


def log_texts(root: Path) -> dict[str, str]:
    """Every file under `root`, by its path below it."""
    return {
        str(path.relative_to(root)): path.read_bytes().decode("utf-8", errors="replace")
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _plain(value: object) -> object:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def firestore_texts(db: firestore.Client) -> dict[str, str]:
    """Every document of every collection, sub-collections included (also under a document
    that does not exist itself), by its path: the path and the data as JSON."""
    texts: dict[str, str] = {}
    pending = list(db.collections())
    while pending:  # bounded: each collection is visited once, and the emulator's data is finite
        collection = pending.pop()
        for ref in collection.list_documents():
            snap = ref.get()
            data = snap.to_dict() if snap.exists else None
            texts[ref.path] = f"{ref.path} {json.dumps(data, default=_plain, ensure_ascii=False)}"
            pending.extend(ref.collections())
    return texts


@dataclass
class Answers:
    """Every answer a client received: status line, headers and body (an httpx event hook)."""

    texts: list[str] = field(default_factory=list)

    def __call__(self, response: httpx.Response) -> None:
        response.read()
        head = f"{response.request.method} {response.url} -> {response.status_code}"
        self.texts.append(f"{head}\n{dict(response.headers)}\n{response.text}")

    def by_place(self) -> dict[str, str]:
        return {f"answer {i}": text for i, text in enumerate(self.texts)}


@pytest.fixture
def answers(e2e: Cloud) -> Iterator[Answers]:
    """Records what `e2e.http` (the stack's key) receives during the test."""
    record = Answers()
    hooks = e2e.http.event_hooks
    e2e.http.event_hooks = {**hooks, "response": [*hooks.get("response", []), record]}
    try:
        yield record
    finally:
        e2e.http.event_hooks = hooks


@pytest.fixture
def anonymous(answers: Answers) -> Iterator[httpx.Client]:
    """A client with no credential of its own (an attacker's), recorded like `e2e.http`."""
    with http_client(event_hooks={"response": [answers]}) as client:
        yield client


# -- the provider double, the token issuer and the DEBUG functions -------------------------------


class Google:
    """Google Programmable Search on the double: `keyed_ok` gets results, `keyed_bad` a 400
    that echoes the key; both record the key they were sent."""

    def __init__(self, server: HTTPServer) -> None:
        self.server = server
        self.keys: list[str | None] = []
        server.expect_request("/keyed_ok/customsearch/v1").respond_with_handler(self.results)
        server.expect_request("/keyed_bad/customsearch/v1").respond_with_handler(self.refusal)

    def results(self, request: Request) -> Response:
        self.keys.append(request.args.get("key"))
        items = [
            {"title": f"Keyed result {i}", "link": f"https://keyed.example/{i}", "snippet": "q"}
            for i in range(3)
        ]
        return Response(json.dumps({"items": items}), content_type="application/json")

    def refusal(self, request: Request) -> Response:
        self.keys.append(key := request.args.get("key"))
        error = {"code": 400, "message": f"API key not valid: {key}", "status": "INVALID_ARGUMENT"}
        return Response(json.dumps({"error": error}), 400, content_type="application/json")

    def platforms(self) -> dict[str, dict[str, Any]]:
        """FANFUSE_EXTRA_PLATFORMS entries: a `google` platform per double, the key in them."""
        return {
            name: {
                "engine": "google",
                "settings": {
                    "base_url": self.server.url_for(f"/{name}"),
                    "api_key": PROVIDER_KEY,
                    "cx": "e2e",
                    "max_attempts": 1,
                },
            }
            for name in KEYED
        }


@dataclass
class Deployment:
    """A start_search that accepts Firebase ID tokens and a run_platform, both logging at DEBUG."""

    start_url: str
    run_url: str
    google: Google
    issuer: SigningKey
    project: str

    def token(self, subject: str, signer: SigningKey | None = None) -> str:
        """A Firebase ID token for `subject`, signed by the published key unless told."""
        issued = claims(
            f"https://securetoken.google.com/{self.project}",
            self.project,
            sub=subject,
            auth_time=int(time.time()) - 60,
            firebase={"sign_in_provider": "password", "identities": {}},
        )
        return (signer or self.issuer).sign(issued, kid=self.issuer.kid)


@pytest.fixture(scope="module")
def deployment(cloud: Cloud, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    server = HTTPServer(host=LOOPBACK, port=0, threaded=True)
    server.start()
    google = Google(server)
    issuer = make_key("e2e-firebase")
    certs = KeySet(server, "/firebase/certs")
    certs.publish(issuer)
    for name in KEYED:  # their queues: the stack made one per platform it was started with
        cloud.stack.tasks.create_queue(queue_id(cloud.addresses.queue_prefix, name))
    source = tmp_path_factory.mktemp("debug-functions") / "main.py"
    source.write_text(DEBUG_MAIN.format(main=str(DEFAULT_FUNCTIONS_SOURCE)))
    ports = {"start_search": free_port(), "run_platform": free_port()}
    urls = {target: f"http://{LOOPBACK}:{port}" for target, port in ports.items()}
    extra = {**json.loads(cloud.env["FANFUSE_EXTRA_PLATFORMS"]), **google.platforms()}
    env = {
        **cloud.addresses.env(),
        **cloud.env,
        "FANFUSE_EXTRA_PLATFORMS": json.dumps(extra),
        "FANFUSE_DEPLOYED_PLATFORMS": json.dumps([*cloud.addresses.deployed, *KEYED]),
        "FANFUSE_FUNCTION_URLS": json.dumps({**cloud.addresses.functions, **urls}),
        "FANFUSE_FIREBASE_PROJECT": cloud.addresses.project,
        "FANFUSE_FIREBASE_CERTS_URL": certs.url,
    }
    logs = cloud.stack.log_dir / "debug"  # grepped with the rest of the stack's logs
    processes = [
        FunctionProcess(target, port, env, source=source, log_dir=logs)
        for target, port in ports.items()
    ]
    try:
        for process in processes:
            process.launch()
        for process in processes:
            process.wait_ready()
        yield Deployment(
            urls["start_search"], urls["run_platform"], google, issuer, cloud.addresses.project
        )
    finally:
        for process in processes:
            process.stop()
        server.clear()
        server.stop()


# -- the tests ---------------------------------------------------------------------------------


def refused(response: httpx.Response, *sent: str) -> None:
    """A 401 that quotes none of what was sent."""
    assert response.status_code == 401, response.text
    for value in sent:
        assert not sightings({"the answer": response.text}, {"what was sent": value})


def test_no_secret_shows_in_a_log_a_document_or_an_answer(
    e2e: Cloud, deployment: Deployment, answers: Answers, anonymous: httpx.Client
) -> None:
    api_key = e2e.addresses.api_key or ""
    key_id, key_secret = keys.parse_key(api_key) or ("", "")
    assert key_secret, "the stack printed no API key"

    # A full search with the API key: every platform kind, three of them failing.
    names = ["docs", "web_ok", "web_fail", "web_bad", *KEYED]
    started = e2e.http.post(deployment.start_url, json={"query": "electrons", "platform": names})
    assert started.status_code == 202, started.text
    view = e2e.wait(started.json())
    task_id = view["task_id"]
    assert view["status"] == "partial", view
    states = {r["name"]: r["state"] for r in view["platform_runs"]}
    assert {n for n, s in states.items() if s == "failed"} == {"web_fail", "web_bad", "keyed_bad"}
    assert "credentials rejected" in (e2e.run_of(view, "keyed_bad")["error"] or "")
    assert set(deployment.google.keys) == {PROVIDER_KEY}  # the key was in play, for both
    assert len(deployment.google.keys) == len(KEYED)
    assert "key=***" in e2e.platform_doc(task_id, "keyed_ok")["calls"][0]["url"]

    # A search with a Firebase ID token: its subject owns it.
    token = deployment.token("firebase-user")
    bearer = {"Authorization": f"Bearer {token}"}
    by_token = anonymous.post(
        deployment.start_url,
        json={"query": "electrons", "platform": "docs,keyed_ok"},
        headers=bearer,
    )
    assert by_token.status_code == 202, by_token.text
    token_task = by_token.json()["task_id"]
    e2e.wait_until(
        lambda: e2e.task_doc(token_task)["status"] in TERMINAL, what="the token's search"
    )
    assert e2e.task_doc(token_task)["owner"] == "firebase:firebase-user"

    # A search cancelled while it runs.
    e2e.pause("web_gate")
    held = e2e.start({"query": "electrons", "platform": "docs,web_gate"})
    assert e2e.http.post(held["cancel_url"]).json()["status"] == "cancelled"

    # Refused callers: a wrong secret, a garbled key, a made-up bearer token, a token signed by
    # an unpublished key, and a good token where Firebase tokens are not accepted.
    wrong = secrets.token_urlsafe(32)
    made_up = ".".join(f"eyJ{secrets.token_urlsafe(30)}" for _ in range(2))
    made_up += "." + secrets.token_urlsafe(40)
    forged = deployment.token("firebase-user", make_key("nobody-published-this"))
    status_url = f"{e2e.url('search_status')}/{task_id}"
    for headers, sent in (
        ({keys.API_KEY_HEADER: f"ff_{key_id}_{wrong}"}, wrong),
        ({keys.API_KEY_HEADER: f"ff_{wrong}"}, wrong),
        ({"Authorization": f"Bearer {made_up}"}, made_up),
        ({"Authorization": f"Bearer {forged}"}, forged),
    ):
        for method, url, body in (
            ("POST", deployment.start_url, {"query": "q"}),
            ("POST", e2e.url("start_search"), {"query": "q"}),
            ("GET", status_url, None),
            ("POST", e2e.url("cancel_search"), {"task_id": task_id}),
        ):
            refused(anonymous.request(method, url, json=body, headers=headers), sent)
    refused(anonymous.get(status_url, headers=bearer), token)

    # Forged task deliveries: signed with a guess, or carrying a bearer token.
    run = json.dumps({"task_id": held["task_id"], "platform": "web_gate"}).encode()
    guessed = {SIGNATURE_HEADER: task_signature("run_platform", run, secrets.token_urlsafe(32))}
    refused(e2e.deliver("run_platform", run, signed=False, headers=guessed))
    cut_short = {"task_id": task_id, "deadline": True}
    with_token = {"Authorization": f"Bearer {made_up}"}
    refused(e2e.deliver("aggregate", cut_short, signed=False, headers=with_token), made_up)
    json_type = {"Content-Type": "application/json"}
    refused(e2e.http.post(deployment.run_url, content=run, headers={**json_type, **guessed}))

    # The grep.
    logs = log_texts(e2e.stack.log_dir)
    expected = {f"{target}.log" for target in FUNCTION_TARGETS} | {
        "debug/start_search.log",
        "debug/run_platform.log",
        "firestore.log",
        "cloud-tasks.log",
    }
    assert expected <= set(logs), sorted(logs)
    for log in ("run_platform.log", "debug/run_platform.log"):
        assert "refused a delivery" in logs[log], log  # the refusals were logged
    assert "customsearch/v1?key=***" in logs["debug/run_platform.log"]  # DEBUG was on
    documents = firestore_texts(e2e.db)
    collections = {path.split("/")[-2] for path in documents}
    keys_collection = e2e.store.collection + KEYS_SUFFIX
    assert {"searches", "platforms", keys_collection} <= collections, collections
    stored = e2e.doc(f"{keys_collection}/{key_id}").to_dict() or {}
    assert stored["secret_sha256"] == hashlib.sha256(key_secret.encode()).hexdigest()
    assert set(stored) <= set(ApiKey.model_fields)  # the hash, the owner, limits and dates

    hidden = {
        "the API key's secret": key_secret,
        "the tasks' HMAC secret": e2e.stack.tasks_secret,
        "the provider's API key": PROVIDER_KEY,
        "the Firebase ID token": token.rpartition(".")[2],  # its signature: unique to it
        "a wrong key's secret": wrong,
        "a made-up bearer token": made_up,
        "a token signed by an unpublished key": forged.rpartition(".")[2],
    }
    write_log = {"the Firestore write log": e2e.write_log.read_text()}
    places = {**logs, **write_log, **documents, **answers.by_place()}
    assert len(answers.texts) > 20  # every call above was recorded
    assert sightings(places, hidden) == []


def test_the_grep_finds_a_planted_secret(e2e: Cloud, answers: Answers, tmp_path: Path) -> None:
    """The grep above can fail: a value planted in each kind of place is found there, even
    deep in a collection the walk knows no name of, encoded, or cut short."""
    planted = 'pl@nted"/' + secrets.token_urlsafe(24)
    e2e.db.document("searches_quota/alice/windows/w1").set({"note": quote(planted, safe="")})
    e2e.db.document("searches/nobody/platforms/docs").set({"calls": [{"error": planted[:20]}]})
    nested = tmp_path / "logs" / "debug" / "run_platform.log"
    nested.parent.mkdir(parents=True)
    nested.write_text(f"INFO {json.dumps({'key': planted})}\n")
    unknown = secrets.token_hex(16)  # a task id, which the 404 answer names
    assert e2e.status(unknown).status_code == 404

    places = {**firestore_texts(e2e.db), **log_texts(tmp_path / "logs"), **answers.by_place()}
    found = sightings(places, {"planted": planted, "the task id asked for": unknown})
    assert {line.split(":")[0] for line in found} == {
        "planted in searches_quota/alice/windows/w1",
        "planted in searches/nobody/platforms/docs",
        "planted in debug/run_platform.log",
        "the task id asked for in answer 0",
    }, found
