"""Fallback chains and hedged requests on the local cloud stacks (the emulators with the
functions, moto with the Lambda handlers): a fallback is its own queued task, on its member's
queue, and exactly-once holds under duplicate deliveries (no member is asked twice); a hedge
cancels the slow primary; the run document says which member answered and why the other did
not. The embedded runtime's tests: tests/integration/test_chains.py."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from tests.support.e2e.cloud import Runtime, concurrently

BEHAVIOUR = {"web_fail": "status/500", "web_ok": "delay/0", "web_slow": "delay/3"}


@pytest.fixture(params=["gcp", "aws"])
def e2e(request: pytest.FixtureRequest) -> Runtime:
    """Each test on a clean slate of each stack."""
    runtime: Runtime = request.getfixturevalue(f"e2e_{request.param}")
    return runtime


def asked(e2e: Runtime, name: str) -> int:
    """Page-1 requests the provider double of `name` received."""
    return e2e.stub.requests[BEHAVIOUR[name]]


def test_a_fallback_is_its_own_queued_task_and_duplicates_ask_no_member_twice(
    e2e: Runtime,
) -> None:
    e2e.pause("web_ok")  # the fallback's task waits on its own queue: the test delivers it
    accepted = e2e.start({"query": "electrons", "platform": "web_fail|web_ok"})
    task_id = accepted["task_id"]

    def handed_over() -> bool:
        run = e2e.run_of(e2e.status(task_id).json(), "web_fail")
        return bool(run["member"] == 1)

    e2e.wait_until(handed_over, what="the hand-over to web_ok")
    waiting = e2e.run_of(e2e.status(task_id).json(), "web_fail")
    assert waiting["state"] == "running" and waiting["lease"] is None
    assert waiting["message"] == "web_fail: failed, web_ok answering"
    assert [(m["name"], m["state"]) for m in waiting["members"]] == [("web_fail", "failed")]
    assert asked(e2e, "web_ok") == 0  # held on web_ok's queue, not run by web_fail's worker

    member = {"task_id": task_id, "platform": "web_fail", "member": "web_ok"}
    first = concurrently([lambda: e2e.deliver("run_platform", member) for _ in range(3)])
    outcomes = sorted(
        a.json().get("outcome") or a.json().get("error") for a in first if a.status_code < 600
    )
    assert outcomes.count("succeeded") == 1, outcomes
    assert set(outcomes) <= {"succeeded", "skipped", "lease_held"}
    stale = {"task_id": task_id, "platform": "web_fail"}
    for body in (stale, member, stale):  # every turn again, after the end
        again = e2e.deliver("run_platform", body)
        assert again.status_code == 200 and again.json()["outcome"] == "skipped"

    view = e2e.wait(accepted)
    assert view["status"] == "completed"
    run = e2e.run_of(view, "web_fail")
    assert run["state"] == "succeeded" and run["answered_by"] == ["web_ok"]
    assert [(m["name"], m["role"], m["state"]) for m in run["members"]] == [
        ("web_fail", "primary", "failed"),
        ("web_ok", "fallback", "answered"),
    ]
    assert "HTTP 500" in run["members"][0]["reason"]
    assert all(r["platforms"] == ["web_ok"] for r in view["results"]) and view["results"]
    assert (asked(e2e, "web_fail"), asked(e2e, "web_ok")) == (1, 1)
    stored = e2e.platform_doc(task_id, "web_fail")
    assert stored["chain"] == ["web_fail", "web_ok"] and stored["member"] == 1


def test_a_slow_primary_is_hedged_cancelled_and_both_calls_are_recorded(e2e: Runtime) -> None:
    body: dict[str, Any] = {"query": "electrons", "platform": "web_slow|web_ok"}
    accepted = e2e.start({**body, "hedge_after_s": 0.5})
    view = e2e.wait(accepted)
    assert view["status"] == "completed"
    run = e2e.run_of(view, "web_slow")
    assert run["answered_by"] == ["web_ok"]
    slow, ok = run["members"]
    assert (slow["state"], slow["reason"]) == ("cancelled", "cancelled: web_ok answered first")
    assert (ok["role"], ok["state"]) == ("hedge", "answered")
    calls = {c["platform"]: c for c in run["calls"]}
    assert calls["web_slow"]["error"] == "cancelled before the answer"
    assert calls["web_ok"]["status"] == 200
    # the final answer came before the primary's would have (its double waits 3 s)
    finalized = datetime.fromisoformat(view["finalized_at"])
    primary_asked = datetime.fromisoformat(slow["started_at"])
    assert (finalized - primary_asked).total_seconds() < 3.0
    assert asked(e2e, "web_slow") == 1 and asked(e2e, "web_ok") == 1
