"""Searches over HTTP on the local cloud stacks: outcomes, idempotence, deadline, cancel.

Every test runs on the GCP stack (emulators, functions) and on the AWS stack (moto, the Lambda
handlers): the same requests, the same answers, the same documents and write counts.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from fanfuse.rules import lifecycle
from fanfuse.wire.models import (
    FusionMethod,
    Hit,
    PlatformRun,
    PlatformState,
    Result,
    SearchRequest,
    Task,
    TaskStatus,
    utcnow,
)
from tests.support.e2e.cloud import SHORT_DEADLINE, Runtime, concurrently

TASK_FIELDS = {
    "task_id", "owner", "request", "queries", "platforms", "status", "progress", "counters",
    "summary", "error", "errors", "fusion", "results", "results_by_query", "filtered", "rerank",
    "cost", "created_at",
    "updated_at", "deadline_at", "expires_at", "finalized_at", "timeline", "trace",
}  # fmt: skip
PLATFORM_FIELDS = {
    "task_id", "name", "index", "of", "state", "stage", "stages", "progress", "percent",
    "message", "attempt", "lease", "lease_until", "retry_at", "results", "error", "provider",
    "timings", "calls", "held_calls", "options", "failed_queries", "failure", "cache", "limits",
    "started_at", "finished_at", "updated_at", "expires_at", "chain", "member", "members",
    "answered_by",
}  # fmt: skip


@pytest.fixture(params=["gcp", "aws"])
def e2e(request: pytest.FixtureRequest) -> Runtime:
    """Each test on a clean slate of each stack."""
    runtime: Runtime = request.getfixturevalue(f"e2e_{request.param}")
    return runtime


def test_docs_and_vectors_complete_and_the_task_document_holds_the_documented_fields(
    e2e: Runtime,
) -> None:
    accepted = e2e.start({"query": "electrons in a field", "platform": "docs, vectors"})
    assert accepted["status"] == "pending"
    assert accepted["status_url"] == f"{e2e.url('search_status')}/{accepted['task_id']}"
    view = e2e.wait(accepted, timeout=120)  # the first vectors run loads the model

    assert view["status"] == "completed", view
    assert view["counters"] == {"done": 2, "failed": 0}
    results = view["results"]
    assert 0 < len(results) <= 10
    assert [r["rank"] for r in results] == list(range(1, len(results) + 1))
    assert any(r["platforms"] == ["docs", "vectors"] for r in results), "nothing was fused"
    assert len({r["url"] for r in results}) == len(results)
    assert view["summary"]["message"] == (
        f"Multi-platform search completed: 2/2 platforms, {len(results)} total results (0 failed)"
    )

    task_id = accepted["task_id"]
    doc = e2e.task_doc(task_id)
    assert set(doc) == TASK_FIELDS
    assert doc["status"] == "completed" and doc["platforms"] == ["docs", "vectors"]
    assert doc["request"]["query"] == ["electrons in a field"]
    assert set(doc["progress"]) == {"percent", "stage", "message"}
    assert doc["progress"]["percent"] == 100
    assert doc["counters"] == {"done": 2, "failed": 0}
    assert doc["errors"] == [] and doc["error"] is None
    as_results = TypeAdapter(list[Result]).validate_python
    assert as_results(doc["results"]) == as_results(results)  # timestamps native vs ISO text
    assert {"rank", "score", "platform", "platforms", "ranks", "url", "title"} <= set(
        doc["results"][0]
    )
    for name in ("created_at", "updated_at", "deadline_at", "expires_at", "finalized_at"):
        assert isinstance(doc[name], datetime) and doc[name].tzinfo is not None, name
    assert doc["expires_at"] - doc["created_at"] == timedelta(minutes=30)  # the TTL field

    for name in ("docs", "vectors"):
        run = e2e.platform_doc(task_id, name)
        assert set(run) == PLATFORM_FIELDS
        assert run["state"] == "succeeded" and run["attempt"] == 1 and run["error"] is None
        assert run["stage"] == f"{name}_searching"
        assert set(run["progress"]) == {"current", "total"}
        assert 0 < len(run["results"]) <= 10
        assert run["timings"]["total"] > 0
        # The TTL deletes sub-documents too (DynamoDB's TTL attribute counts whole seconds).
        assert abs(run["expires_at"] - doc["expires_at"]) < timedelta(seconds=1)


def test_write_counts_per_document_for_a_three_platform_search(e2e: Runtime) -> None:
    # bypass: the second search must ask the platforms again, not the cache.
    payload = {"query": "electrons", "platform": ["docs", "vectors", "web_ok"], "cache": "bypass"}
    e2e.wait(e2e.start(payload), timeout=120)  # warm: indexes built, model loaded
    accepted = e2e.start(payload)
    view = e2e.wait(accepted)
    assert view["status"] == "completed", view
    task_id = accepted["task_id"]
    ops = e2e.write_ops(task_id)
    # A lease renewal (heartbeat.py) is one write per third of the lease a run lasts: how many
    # depends on the machine's speed, so they are counted apart.
    totals = {
        doc: sum(n for (d, op), n in ops.items() if d == doc and op != "renew") for doc, _ in ops
    }
    renewals = {doc: n for (doc, op), n in ops.items() if op == "renew"}
    print(f"\nwrites per document, 3-platform search: {totals}, renewals {renewals}")
    # The task document: once at start, once per platform at fan-in, the last of which
    # finalizes in the same write (rules/fan_in.py).
    assert ops["task", "create"] == 1 and ops["task", "transact"] == 3
    assert totals["task"] == 4
    # A platform document: created with the task, claimed, finished (2 transactions), and no
    # progress write between: a one-query search reports nothing until it is found, and docs
    # and vectors report nothing once their indexes are built. No content documents:
    # include_content is off.
    for name in ("docs", "vectors", "web_ok"):
        assert ops[name, "create"] == 1 and ops[name, "transact"] == 2, ops
    assert totals == {"task": 4, "docs": 3, "vectors": 3, "web_ok": 3}


def test_one_platform_failing_gives_partial(e2e: Runtime) -> None:
    view = e2e.wait(e2e.start({"query": "electrons", "platform": "docs,web_fail"}))
    assert view["status"] == "partial"
    assert view["counters"] == {"done": 2, "failed": 1}
    assert {r["platform"] for r in view["results"]} == {"docs"}
    (error,) = view["errors"]
    assert error["platform"] == "web_fail" and error["state"] == "failed"
    assert "HTTP 500" in error["error"], error
    assert "(1 failed)" in view["summary"]["message"]
    assert e2e.run_of(view, "web_fail")["state"] == "failed"


def test_all_platforms_failing_gives_failed_with_the_aggregated_error(e2e: Runtime) -> None:
    view = e2e.wait(e2e.start({"query": "electrons", "platform": "web_fail,web_bad"}))
    assert view["status"] == "failed"
    assert view["results"] == []
    assert view["counters"] == {"done": 2, "failed": 2}
    error = view["error"]
    assert error.startswith("All 2 platforms failed: "), error
    assert "web_fail: web_fail: HTTP 500" in error
    assert "web_bad: web_bad: malformed response" in error
    assert [e["platform"] for e in view["errors"]] == ["web_fail", "web_bad"]


def test_redelivered_platform_and_aggregate_tasks_change_nothing(e2e: Runtime) -> None:
    accepted = e2e.start({"query": "electrons", "platform": "docs,web_ok"})
    task_id = accepted["task_id"]
    before = e2e.wait(accepted)
    assert before["status"] == "completed"
    paths = [
        f"searches/{task_id}",
        *(f"searches/{task_id}/platforms/{p}" for p in ("docs", "web_ok")),
    ]
    stamps = {p: e2e.stamp(p) for p in paths}
    writes = e2e.writes(task_id)
    searched = e2e.stub.requests["delay/0"]

    for platform in ("docs", "web_ok", "docs"):
        answer = e2e.deliver("run_platform", {"task_id": task_id, "platform": platform})
        assert answer.status_code == 200 and answer.json()["outcome"] == "skipped"
    for deadline in (False, True, False):
        answer = e2e.deliver("aggregate", {"task_id": task_id, "deadline": deadline})
        assert answer.status_code == 200 and answer.json()["outcome"] == "already_final"

    after = e2e.status(task_id).json()
    assert after["counters"] == {"done": 2, "failed": 0}
    assert after["results"] == before["results"]
    assert {p: e2e.stamp(p) for p in paths} == stamps
    assert e2e.writes(task_id) == writes
    assert e2e.stub.requests["delay/0"] == searched  # web_ok was not searched again


def test_a_platform_task_delivered_again_while_it_runs_is_refused_and_counted_once(
    e2e: Runtime,
) -> None:
    e2e.pause("web_gate")  # this test delivers web_gate itself, a second time while it runs
    accepted = e2e.start({"query": "electrons", "platform": "docs,web_gate"})
    task_id = accepted["task_id"]
    message = {"task_id": task_id, "platform": "web_gate"}
    answers: list[httpx.Response] = []
    first = threading.Thread(target=lambda: answers.append(e2e.deliver("run_platform", message)))
    first.start()
    e2e.wait_until(lambda: e2e.stub.waiting("web_gate") == 1, what="the first delivery running")
    duplicate = e2e.deliver("run_platform", message)  # its lease is live: no provider call
    assert duplicate.status_code == 503 and duplicate.json()["error"] == "lease_held"
    assert int(duplicate.headers["Retry-After"]) >= 1
    e2e.stub.release("web_gate")
    first.join(60)

    assert [a.json()["outcome"] for a in answers] == ["succeeded"]
    assert e2e.stub.waiting("web_gate") == 1
    view = e2e.wait(accepted)
    assert view["status"] == "completed"
    assert view["counters"] == {"done": 2, "failed": 0}
    run = e2e.run_of(view, "web_gate")
    assert run["attempt"] == 1
    assert len(run["results"]) == 10
    urls = [r["url"] for r in view["results"]]
    assert len(urls) == len(set(urls))
    assert e2e.writes(task_id)[f"searches/{task_id}"] == 3  # start, 2 fan-ins (one finalizes)


def _finished_task(e2e: Runtime) -> str:
    """A task whose platforms have both succeeded, but which nobody has aggregated yet."""
    now = utcnow()
    request = SearchRequest.model_validate({"query": "q", "platform": ["docs", "web_ok"]})
    task = Task(
        task_id=f"agg{time.monotonic_ns()}",
        request=request,
        queries=request.queries,
        platforms=request.platforms,
        status=TaskStatus.RUNNING,
        fusion=FusionMethod.RRF,
        counters={"done": 2, "failed": 0},
        deadline_at=now + timedelta(minutes=2),
        expires_at=now + timedelta(minutes=30),
    )
    runs = [
        PlatformRun(
            task_id=task.task_id,
            name=name,
            index=i,
            of=2,
            state=PlatformState.SUCCEEDED,
            results=[
                Hit(title=f"{name} {k}", url=f"https://e.test/{k}", rank=k) for k in (1, 2, 3)
            ],
        )
        for i, name in enumerate(request.platforms, 1)
    ]
    e2e.store.create(task, runs)
    return task.task_id


def test_aggregate_called_concurrently_finalizes_exactly_once(e2e: Runtime) -> None:
    task_id = _finished_task(e2e)
    # Three deliveries to the aggregate function and, from this process, a finalization in
    # its own transaction: contention inside one process and between two.
    bodies = [{"task_id": task_id, "deadline": deadline} for deadline in (False, True, False)]
    calls: list[Any] = [lambda b=b: e2e.deliver("aggregate", b) for b in bodies]
    calls.append(
        lambda: e2e.store.transact(task_id, None, lifecycle.finalize(utcnow(), force=True))
    )
    *answers, local = concurrently(calls)
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    outcomes = [a.json()["outcome"] for a in answers]
    finalized = outcomes.count("completed") + (local is not None)
    assert finalized == 1, (outcomes, local)
    assert set(outcomes) - {"completed"} <= {"waiting", "already_final"}, outcomes

    doc = e2e.task_doc(task_id)
    assert doc["status"] == "completed" and doc["finalized_at"] is not None
    assert [r["platforms"] for r in doc["results"]] == [["docs", "web_ok"]] * 3
    functions_wrote = e2e.writes(task_id)[f"searches/{task_id}"]
    assert functions_wrote == (1 if local is None else 0)
    stamp = e2e.stamp(f"searches/{task_id}")
    for deadline in (False, True):
        answer = e2e.deliver("aggregate", {"task_id": task_id, "deadline": deadline})
        assert answer.json()["outcome"] == "already_final"
    assert e2e.stamp(f"searches/{task_id}") == stamp


def test_a_platform_that_never_reports_is_timed_out_by_the_deadline_task(e2e: Runtime) -> None:
    e2e.pause("web_ok")  # its task is enqueued but never delivered: the worker never reports
    started = time.monotonic()
    accepted = e2e.start({"query": "electrons", "platform": "docs,web_ok"}, short_deadline=True)
    view = e2e.wait(accepted, timeout=30)
    elapsed = time.monotonic() - started

    assert view["status"] == "partial"
    assert elapsed >= SHORT_DEADLINE - 0.5
    assert e2e.run_of(view, "docs")["state"] == "succeeded"
    late = e2e.run_of(view, "web_ok")
    assert late["state"] == "timed_out" and late["error"] == "no result before the deadline"
    assert view["errors"] == [
        {"platform": "web_ok", "state": "timed_out", "error": "no result before the deadline"}
    ]
    assert view["results"] and {r["platform"] for r in view["results"]} == {"docs"}
    doc = e2e.task_doc(accepted["task_id"])
    assert doc["finalized_at"] - doc["created_at"] >= timedelta(seconds=SHORT_DEADLINE)
    # Delivered after all (the queue resumes): a no-op, nothing is searched.
    message = {"task_id": accepted["task_id"], "platform": "web_ok"}
    assert e2e.deliver("run_platform", message).json()["outcome"] == "skipped"
    assert e2e.stub.requests["delay/0"] == 0


def test_a_platform_that_hangs_is_timed_out_at_the_deadline(e2e: Runtime) -> None:
    accepted = e2e.start({"query": "electrons", "platform": "docs,web_gate"}, short_deadline=True)
    view = e2e.wait(accepted, timeout=30)  # the gate is never opened
    assert view["status"] == "partial"
    assert e2e.stub.waiting("web_gate") == 1  # it did run, and hung
    assert e2e.run_of(view, "web_gate")["state"] == "timed_out"
    assert [e["platform"] for e in view["errors"]] == ["web_gate"]


def test_cancel_while_running_and_nothing_is_written_after(e2e: Runtime) -> None:
    e2e.pause("web_gate")  # delivered by the test, so it can see the worker's answer
    accepted = e2e.start({"query": "electrons", "platform": "docs,web_gate"})
    task_id = accepted["task_id"]
    answer: list[httpx.Response] = []
    worker = threading.Thread(
        target=lambda: answer.append(
            e2e.deliver("run_platform", {"task_id": task_id, "platform": "web_gate"})
        )
    )
    worker.start()
    e2e.wait_until(lambda: e2e.stub.waiting("web_gate") == 1, what="web_gate searching")
    e2e.wait_until(
        lambda: e2e.run_of(e2e.status(task_id).json(), "docs")["state"] == "succeeded",
        what="docs done",
    )

    cancelled = e2e.http.post(e2e.url("cancel_search"), json={"task_id": task_id})
    assert cancelled.status_code == 200, cancelled.text
    view = cancelled.json()
    assert view["status"] == "cancelled"
    assert e2e.run_of(view, "web_gate")["state"] == "cancelled"
    assert e2e.run_of(view, "docs")["state"] == "succeeded"
    task_writes = e2e.writes(task_id)[f"searches/{task_id}"]

    e2e.stub.release("web_gate")  # the provider answers after the cancel
    worker.join(60)
    assert answer[0].json()["outcome"] == "discarded"

    doc = e2e.task_doc(task_id)
    assert doc["status"] == "cancelled" and doc["results"] == []
    assert doc["counters"] == {"done": 2, "failed": 1}  # the cancelled run: done, not succeeded
    run = e2e.platform_doc(task_id, "web_gate")
    assert run["state"] == "cancelled" and run["results"] == []
    assert e2e.writes(task_id)[f"searches/{task_id}"] == task_writes
    assert e2e.status(task_id).json()["status"] == "cancelled"
    # And it stays so: a late aggregate or a redelivery changes nothing.
    assert e2e.deliver("aggregate", {"task_id": task_id}).json()["outcome"] == "already_final"
    message = {"task_id": task_id, "platform": "web_gate"}
    assert e2e.deliver("run_platform", message).json()["outcome"] == "skipped"


def test_search_status_carries_the_preview_while_running_and_reading_it_writes_nothing(
    e2e: Runtime,
) -> None:
    accepted = e2e.start({"query": "electrons", "platform": "docs,web_gate"})
    task_id = accepted["task_id"]
    e2e.wait_until(lambda: e2e.stub.waiting("web_gate") == 1, what="web_gate searching")
    e2e.wait_until(
        lambda: e2e.run_of(e2e.status(task_id).json(), "docs")["state"] == "succeeded",
        what="docs done",
    )
    writes = e2e.writes(task_id)
    views = [e2e.status(task_id).json() for _ in range(3)]
    assert e2e.writes(task_id) == writes  # a preview is computed when read, never stored
    view = views[-1]
    assert view["status"] == "running"
    preview = view["preview"]
    assert preview["partial"] is True and preview["platforms"] == ["docs"]
    assert preview["results"] and {tuple(r["platforms"]) for r in preview["results"]} == {("docs",)}
    assert "preview" not in e2e.task_doc(task_id)

    e2e.stub.release("web_gate")
    final = e2e.wait(accepted, timeout=60)
    assert final["status"] == "completed" and final["preview"] is None


def test_the_last_fan_in_finalizes_the_search_while_the_aggregate_queue_is_held(
    e2e: Runtime,
) -> None:
    """The cloud runtimes finalize at the last platform's fan-in (runtimes/cloud.py builds its
    service with `finalize_at_fan_in=True`: one queue hop less). With the aggregate queue held,
    neither the fan-in's aggregate task nor the deadline task is delivered, and the search
    still ends, fused, with nothing left to the aggregator.

    Kills: `finalize_at_fan_in=True` -> `False` in runtimes/cloud.py (the search would wait for
    the held aggregate queue)."""
    e2e.pause("aggregate")
    accepted = e2e.start({"query": "electrons", "platform": "docs,web_ok"})
    view = e2e.wait(accepted, timeout=60)
    assert view["status"] == "completed", view
    assert view["counters"] == {"done": 2, "failed": 0}
    assert view["results"] and view["finalized_at"] is not None
    assert view["summary"]["message"].startswith("Multi-platform search completed: 2/2 platforms")
