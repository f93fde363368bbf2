"""The functions' HTTP contract: JSON error bodies naming the field, status codes, owners."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx

from tests.e2e.cloud import Cloud


def problems(response: httpx.Response) -> dict[str, str]:
    body = response.json()
    assert set(body) == {"error", "message", "problems"}, body
    return {p["field"]: p["problem"] for p in body["problems"]}


def userinfo(claims: dict[str, Any]) -> dict[str, str]:
    """What API Gateway forwards after verifying a caller's JWT: its claims, base64url."""
    raw = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return {"X-Apigateway-Api-Userinfo": raw}


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
    assert problems(nul) == {"query": "query 1 contains the control character U+0000"}
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


def test_the_owner_comes_from_the_gateway_and_only_the_owner_sees_the_search(e2e: Cloud) -> None:
    alice = userinfo({"sub": "alice-uid", "email": "alice@example.com"})
    bob = userinfo({"sub": "bob-uid"})
    accepted = e2e.start({"query": "electrons", "platform": "docs"}, headers=alice)
    task_id = accepted["task_id"]
    assert e2e.task_doc(task_id)["owner"] == "alice-uid"

    mine = e2e.status(task_id, headers=alice)
    assert mine.status_code == 200 and mine.json()["owner"] == "alice-uid"
    assert e2e.status(task_id, headers=bob).status_code == 404
    assert e2e.status(task_id).status_code == 404
    cancel = e2e.url("cancel_search")
    assert e2e.http.post(cancel, json={"task_id": task_id}, headers=bob).status_code == 404

    bad = e2e.http.post(
        e2e.url("start_search"),
        json={"query": "q", "platform": "docs"},
        headers={"X-Apigateway-Api-Userinfo": "%%%"},
    )
    assert bad.status_code == 400 and set(problems(bad)) == {"X-Apigateway-Api-Userinfo"}
    # Without the header (the local stack, no gateway) searches have no owner.
    anonymous = e2e.start({"query": "electrons", "platform": "docs"})
    assert e2e.task_doc(anonymous["task_id"])["owner"] is None
    assert e2e.status(anonymous["task_id"], headers=bob).status_code == 200


def test_a_caller_at_its_cap_of_searches_in_flight_gets_a_429_with_retry_after(
    e2e: Cloud,
) -> None:
    """The deployment's default cap (FANFUSE_MAX_IN_FLIGHT, 10): the searches stay in flight
    while their queue is held, and the next start is refused with nothing written."""
    from fanfuse.models import utcnow

    e2e.pause("web_ok")
    caller = userinfo({"sub": "busy-uid"})
    for _ in range(10):
        e2e.start({"query": "electrons", "platform": "web_ok"}, headers=caller)
    refused = e2e.http.post(
        e2e.url("start_search"), json={"query": "electrons", "platform": "web_ok"}, headers=caller
    )
    assert refused.status_code == 429, refused.text
    assert refused.headers["Retry-After"] == "5"
    body = refused.json()
    assert body["error"] == "rate_limited" and "at most 10 at once" in body["message"]
    assert e2e.store.count_in_flight("busy-uid", utcnow()) == 10
    other = userinfo({"sub": "idle-uid"})  # a cap of its own
    e2e.start({"query": "electrons", "platform": "web_ok"}, headers=other)
