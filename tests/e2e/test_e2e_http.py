"""The functions' HTTP contract: JSON error bodies naming the field, status codes, verified
callers and the owners of searches."""

from __future__ import annotations

import base64
import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fanfuse.auth import keys
from fanfuse.auth.callers import USERINFO_HEADER as USERINFO
from fanfuse.auth.task_deliveries import SIGNATURE_HEADER
from fanfuse.store.write_log import WriteLog
from fanfuse.tools.devstack.functions_host import FunctionProcess
from fanfuse.wire.models import utcnow
from tests.support.e2e.cloud import TERMINAL, Cloud, http_client
from tests.support.signing import task_signature


def problems(response: httpx.Response) -> dict[str, str]:
    body = response.json()
    assert set(body) == {"error", "message", "problems"}, body
    return {p["field"]: p["problem"] for p in body["problems"]}


def userinfo(claims: dict[str, Any]) -> dict[str, str]:
    """What API Gateway forwards after verifying a caller's JWT: its claims, base64url."""
    raw = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return {USERINFO: raw}


def test_start_search_refuses_bad_input_with_every_problem_named(e2e: Cloud) -> None:
    url = e2e.url("start_search")
    response = e2e.http.post(
        url,
        json={"query": ["a"] * 6, "platform": "docs,nope", "max_results": 0, "colour": "red"},
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    found = problems(response)
    assert set(found) == {"query", "platform", "max_results", "colour"}
    assert found["query"] == "at most 5 queries per request, got 6"
    assert found["platform"].startswith("unknown platform 'nope'; available: docs, vectors")
    assert found["colour"] == "unknown field"
    assert "greater than or equal to 1" in found["max_results"]

    bad_json = e2e.http.post(
        url, content=b'{"query": ', headers={"Content-Type": "application/json"}
    )
    assert bad_json.status_code == 400
    assert problems(bad_json)["body"].startswith("invalid JSON: Expecting value")
    assert problems(e2e.http.post(url, content=b"")) == {
        "body": "expected a JSON object, got nothing"
    }
    assert problems(e2e.http.post(url, json=["docs"])) == {"body": "expected a JSON object"}
    as_text = e2e.http.post(url, content=b'{"query": "q"}', headers={"Content-Type": "text/plain"})
    assert as_text.status_code == 415 and as_text.json()["error"] == "unsupported_media_type"
    deep = b"[" * 30_000 + b"]" * 30_000
    nested = e2e.http.post(url, content=deep, headers={"Content-Type": "application/json"})
    assert problems(nested) == {"body": "JSON nested deeper than 32 levels"}
    nul = e2e.http.post(url, json={"query": "a\x00b", "platform": "docs"})
    assert problems(nul) == {"query": "contains the control character U+0000"}
    escape = e2e.http.post(url, json={"query": "q", "weights": {"docs": 1, "w\x1b": 2}})
    assert problems(escape) == {"weights": "has a key that contains the control character U+001B"}
    assert problems(e2e.http.post(url, json={})) == {"query": "field required"}

    too_big = e2e.http.post(url, content=b"x" * 70_000)
    assert too_big.status_code == 413 and too_big.json()["error"] == "payload_too_large"

    wrong = e2e.http.get(url)
    assert wrong.status_code == 405 and wrong.headers["Allow"] == "POST"
    assert wrong.json() == {
        "error": "method_not_allowed",
        "message": "start_search accepts POST, not GET",
        "problems": [],
    }
    assert not list(e2e.db.collection("searches").stream())  # nothing was written


def test_status_and_cancel_answer_404_400_409_405(e2e: Cloud) -> None:
    unknown = "0123456789abcdef0123456789abcdef"
    status = e2e.status(unknown)
    assert status.status_code == 404
    assert status.json()["error"] == "not_found" and unknown in status.json()["message"]
    by_query = e2e.http.get(e2e.url("search_status"), params={"task_id": unknown})
    assert by_query.status_code == 404
    assert problems(e2e.http.get(e2e.url("search_status"))) == {"task_id": "field required"}
    malformed = e2e.http.get(e2e.url("search_status"), params={"task_id": "../x y"})
    assert malformed.status_code == 400 and set(problems(malformed)) == {"task_id"}
    assert e2e.http.post(f"{e2e.url('search_status')}/{unknown}").status_code == 405

    cancel = e2e.url("cancel_search")
    assert e2e.http.post(cancel, json={"task_id": unknown}).status_code == 404
    assert problems(e2e.http.post(cancel, json={})) == {"task_id": "field required"}
    assert problems(e2e.http.post(cancel, json={"task_id": unknown, "x": 1})) == {
        "x": "unknown field"
    }
    assert e2e.http.get(cancel).status_code == 405

    view = e2e.wait(e2e.start({"query": "electrons", "platform": "docs"}))
    assert view["status"] == "completed"
    conflict = e2e.http.post(cancel, json={"task_id": view["task_id"]})
    assert conflict.status_code == 409
    assert conflict.json()["error"] == "conflict"
    assert conflict.json()["message"] == f"search {view['task_id']} is already completed"


def test_task_targets_refuse_bad_bodies_and_ack_them_for_cloud_tasks(e2e: Cloud) -> None:
    # A direct caller is told what is wrong (400/404)...
    direct = e2e.deliver("run_platform", b"{not json", from_cloud_tasks=False)
    assert direct.status_code == 400 and set(problems(direct)) == {"body"}
    missing = e2e.deliver("run_platform", {"task_id": "abc"}, from_cloud_tasks=False)
    assert missing.status_code == 400 and problems(missing) == {"platform": "field required"}
    odd = e2e.deliver(
        "run_platform", {"task_id": "a/b", "platform": "docs"}, from_cloud_tasks=False
    )
    assert odd.status_code == 400 and set(problems(odd)) == {"task_id"}
    gone = e2e.deliver("aggregate", {"task_id": "nosuchtask"}, from_cloud_tasks=False)
    assert gone.status_code == 404
    gone = e2e.deliver(
        "run_platform", {"task_id": "nosuchtask", "platform": "docs"}, from_cloud_tasks=False
    )
    assert gone.status_code == 404
    assert e2e.http.get(e2e.url("aggregate")).status_code == 405

    # ...while Cloud Tasks, which retries anything but 2xx, gets an acknowledgement.
    for target, body in (
        ("run_platform", b"{not json"),
        ("aggregate", {"task_id": "nosuchtask"}),
        ("run_platform", {"task_id": "nosuchtask", "platform": "docs"}),
    ):
        answer = e2e.deliver(target, body)
        assert answer.status_code == 200
        assert answer.json()["outcome"] == "dropped"
        assert answer.json()["error"]["error"] in ("invalid_request", "not_found")

    view = e2e.wait(e2e.start({"query": "electrons", "platform": "docs"}))
    stranger = {"task_id": view["task_id"], "platform": "vectors"}
    answer = e2e.deliver("run_platform", stranger, from_cloud_tasks=False)
    assert answer.status_code == 400
    assert problems(answer) == {"platform": "'vectors' is not a platform of this search"}


def test_task_targets_refuse_deliveries_the_queue_did_not_sign(e2e: Cloud) -> None:
    # A search whose one platform waits in its paused queue: nothing else writes meanwhile.
    e2e.pause("web_ok")
    accepted = e2e.start({"query": "electrons", "platform": "web_ok"})
    task_id = accepted["task_id"]

    def state() -> tuple[dict[str, Any], dict[str, Any], Counter[str]]:
        return e2e.task_doc(task_id), e2e.platform_doc(task_id, "web_ok"), e2e.writes(task_id)

    before = state()
    cut_short = {"task_id": task_id, "deadline": True}
    run = {"task_id": task_id, "platform": "web_ok"}
    for target, body in (("aggregate", cut_short), ("run_platform", run)):
        other_body = json.dumps({**body, "task_id": "another"}).encode()
        body_bytes = json.dumps(body).encode()
        elsewhere = "run_platform" if target == "aggregate" else "aggregate"
        expired = task_signature(
            target, body_bytes, e2e.tasks_secret, not_before=time.time() - 7200, lifetime=60
        )
        for forged in (
            {"signed": False},  # it says it comes from Cloud Tasks, and nothing proves it
            {"headers": {SIGNATURE_HEADER: task_signature(target, body_bytes, "a-guess")}},
            {"headers": {SIGNATURE_HEADER: e2e.signature(target, other_body)}},  # another body's
            {"headers": {SIGNATURE_HEADER: e2e.signature(elsewhere, body_bytes)}},  # other target
            {"headers": {SIGNATURE_HEADER: expired}},
            {"signed": False, "headers": {"Authorization": "Bearer e30.e30."}},
        ):
            answer = e2e.deliver(target, body, **forged)
            assert answer.status_code == 401, answer.text
            assert answer.json()["error"] == "unauthorized"
            assert answer.json()["message"].startswith(f"{target} accepts only Cloud Tasks")
            assert e2e.stack.tasks_secret not in answer.text
    assert state() == before
    assert before[0]["status"] not in TERMINAL

    # The very same deadline, signed as the queue signs it, is obeyed at once.
    assert e2e.deliver("aggregate", cut_short).status_code == 200
    assert e2e.wait(accepted, timeout=10)["status"] in TERMINAL


def documents(e2e: Cloud) -> int:
    """Every search document (and the write log's count of every write so far)."""
    return len(list(e2e.db.collection("searches").stream())) + sum(
        WriteLog.read(e2e.write_log, prefix="searches/").values()
    )


def stored_key(e2e: Cloud, owner: str, *, revoked: bool = False) -> dict[str, str]:
    """The headers of a new key for `owner`, stored (revoked, if asked) in the stack's Firestore."""
    plaintext, record = keys.new_key(owner, "e2e", None, None, utcnow())
    e2e.store.put_key(keys.revoked(record, utcnow()) if revoked else record)
    return {keys.API_KEY_HEADER: plaintext}


def assert_401(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.json()["error"] == "unauthorized" and response.json()["problems"] == []
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.fixture
def anonymous() -> Iterator[httpx.Client]:
    """A client that sends no credential (Cloud's sends the stack's key with every call)."""
    with http_client() as client:
        yield client


def test_no_credential_or_a_wrong_key_is_401_and_nothing_is_written(
    e2e: Cloud, anonymous: httpx.Client
) -> None:
    view = e2e.wait(e2e.start({"query": "electrons", "platform": "docs"}))
    task_id = view["task_id"]
    before = documents(e2e)
    never_stored, _ = keys.new_key("local", "", None, None, utcnow())
    key_id, secret = keys.parse_key(e2e.addresses.api_key or "") or ("", "")
    for headers in (
        {},
        {keys.API_KEY_HEADER: never_stored},
        {keys.API_KEY_HEADER: f"ff_{key_id}_{secret[::-1]}"},  # the stack's id, a wrong secret
        {keys.API_KEY_HEADER: "let me in"},
        {"Authorization": "Basic bG9jYWw6bG9jYWw="},
    ):
        for method, url, body in (
            ("POST", e2e.url("start_search"), {"query": "q"}),
            ("GET", f"{e2e.url('search_status')}/{task_id}", None),
            ("POST", e2e.url("cancel_search"), {"task_id": task_id}),
        ):
            assert_401(anonymous.request(method, url, json=body, headers=headers))
    told = anonymous.post(e2e.url("start_search"), json={"query": "q"}).json()["message"]
    assert "X-Api-Key" in told and "fanfuse keys create" in told and "Bearer" in told
    assert documents(e2e) == before
    # The OpenAPI document needs no credential.
    assert anonymous.get(f"{e2e.url('search_status')}/openapi.json").status_code == 200


def test_a_revoked_key_is_403_and_nothing_is_written(e2e: Cloud, anonymous: httpx.Client) -> None:
    revoked = stored_key(e2e, "mallory", revoked=True)
    before = documents(e2e)
    answer = anonymous.post(e2e.url("start_search"), json={"query": "q"}, headers=revoked)
    assert answer.status_code == 403 and answer.json()["error"] == "forbidden"
    assert "was revoked" in answer.json()["message"]
    assert documents(e2e) == before


def test_the_key_owner_owns_the_search_and_another_owner_cannot_see_or_cancel_it(
    e2e: Cloud, anonymous: httpx.Client
) -> None:
    e2e.pause("web_gate")  # the search stays running, so a cancel would succeed for its owner
    accepted = e2e.start({"query": "electrons", "platform": "docs,web_gate"})
    task_id = accepted["task_id"]
    assert e2e.task_doc(task_id)["owner"] == "key:local"
    assert e2e.status(task_id).json()["owner"] == "key:local"

    bob = stored_key(e2e, "bob")
    cancel = e2e.url("cancel_search")
    for answer in (
        anonymous.get(accepted["status_url"], headers=bob),
        anonymous.get(e2e.url("search_status"), params={"task_id": task_id}, headers=bob),
        anonymous.post(cancel, json={"task_id": task_id}, headers=bob),
        anonymous.post(cancel, params={"task_id": task_id}, headers=bob),
    ):
        assert answer.status_code == 404, answer.text
        assert answer.json()["message"] == f"no search with task_id {task_id!r}"
    assert e2e.task_doc(task_id)["status"] != "cancelled"
    mine = e2e.http.post(accepted["cancel_url"])
    assert mine.status_code == 200 and mine.json()["status"] == "cancelled"


@pytest.fixture(scope="module")
def trusting_start(cloud: Cloud, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """start_search of a deployment behind API Gateway (FANFUSE_TRUST_GATEWAY): its URL."""
    env = {**cloud.addresses.env(), **cloud.env, "FANFUSE_TRUST_GATEWAY": "true"}
    logs = tmp_path_factory.mktemp("trusting")
    process = FunctionProcess("start_search", env=env, log_dir=logs).start()
    try:
        yield process.url
    finally:
        process.stop()


def test_the_gateway_header_is_ignored_unless_the_gateway_is_trusted(
    e2e: Cloud, anonymous: httpx.Client, trusting_start: str
) -> None:
    alice = userinfo({"sub": "alice-uid", "email": "alice@example.com"})
    body = {"query": "electrons", "platform": "docs"}
    # Not behind a gateway (the stack's functions): anyone could set the header.
    assert_401(anonymous.post(e2e.url("start_search"), json=body, headers=alice))
    spoofed = e2e.start(body, headers=alice)  # with the stack's key too: the key decides
    assert e2e.task_doc(spoofed["task_id"])["owner"] == "key:local"

    # Behind the gateway, its claims name the caller.
    trusted = anonymous.post(trusting_start, json=body, headers=alice)
    assert trusted.status_code == 202, trusted.text
    task_id = trusted.json()["task_id"]
    assert e2e.task_doc(task_id)["owner"] == "gateway:alice-uid"
    assert e2e.status(task_id).status_code == 404  # the `local` key's owner is not alice
    garbled = anonymous.post(trusting_start, json=body, headers={USERINFO: "%%%"})
    assert_401(garbled)
    assert "not base64url JSON claims with a `sub`" in garbled.json()["message"]


def test_a_caller_at_its_cap_of_searches_in_flight_gets_a_429_with_retry_after(
    e2e: Cloud,
) -> None:
    """The deployment's default cap (FANFUSE_MAX_IN_FLIGHT, 10): the searches stay in flight
    while their queue is held, and the next start is refused with nothing written."""
    e2e.pause("web_ok")
    caller = stored_key(e2e, "busy-uid")
    for _ in range(10):
        e2e.start({"query": "electrons", "platform": "web_ok"}, headers=caller)
    refused = e2e.http.post(
        e2e.url("start_search"), json={"query": "electrons", "platform": "web_ok"}, headers=caller
    )
    assert refused.status_code == 429, refused.text
    assert refused.headers["Retry-After"] == "5"
    body = refused.json()
    assert body["error"] == "rate_limited" and "at most 10 at once" in body["message"]
    assert e2e.store.count_in_flight("key:busy-uid", utcnow()) == 10
    other = stored_key(e2e, "idle-uid")  # a cap of its own
    e2e.start({"query": "electrons", "platform": "web_ok"}, headers=other)
