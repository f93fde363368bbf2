"""Faults on the emulator stack: a worker killed mid-run, duplicate deliveries, late progress
writes, a deadline task that races normal completion, the Firestore emulator stopped mid-search.
Each test is bounded (every wait has a timeout, a stopped emulator is always continued) and
counts what it claims: provider calls on the stub server, writes through the functions' write log.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.e2e.cloud import LEASE_SECONDS, Cloud, concurrently

BURST = 10
STALL_S = 5.0
"""How long the Firestore emulator is stopped (issue 11): under a store call's timeout
(firestore_calls.CALL_TIMEOUT_S), so the calls that meet it wait it out instead of failing."""
BUDGET_S = 3.0
"""A search budget that runs out inside the stall when the stall starts right after set-up."""


def _held_search(
    e2e: Cloud, budget_s: float | None = None
) -> tuple[dict[str, Any], threading.Thread, list[httpx.Response]]:
    """A search of docs and web_gate whose web_gate run the test delivered itself and which is
    now waiting at the provider (the gate), so the run is `running` under a live lease."""
    e2e.pause("web_gate")  # the queue holds its own copy: only the test delivers web_gate
    payload = {"query": "electrons", "platform": "docs,web_gate", "timeout_s": budget_s}
    accepted = e2e.start({k: v for k, v in payload.items() if v is not None})
    task_id = accepted["task_id"]
    answers: list[httpx.Response] = []
    body = {"task_id": task_id, "platform": "web_gate"}
    worker = threading.Thread(target=lambda: answers.append(e2e.deliver("run_platform", body)))
    worker.start()
    e2e.wait_until(lambda: e2e.stub.waiting("web_gate") == 1, what="web_gate at the provider")
    e2e.wait_until(
        lambda: e2e.run_of(e2e.status(task_id).json(), "docs")["state"] == "succeeded",
        what="docs done",
    )
    return accepted, worker, answers


def _finalizations(e2e: Cloud, task_id: str, view: dict[str, Any], timed_out: int = 0) -> int:
    """Task-document writes that were neither the start nor a counted fan-in: finalizations.

    The task document is written once at start, once per platform whose fan-in counted it (a
    succeeded run, and the `timed_out` runs whose worker's own fan-in counted them; a run ended
    by the deadline aggregate or a cancel is not counted by a fan-in of its own) and once per
    finalization, except the one the last fan-in made in its own write (rules/fan_in.py: the
    timeline says `finalized_by: fan_in`).
    """
    fan_ins = sum(1 for r in view["platform_runs"] if r["state"] == "succeeded") + timed_out
    at_fan_in = int(view["timeline"]["finalized_by"] == "fan_in")
    return e2e.writes(task_id)[f"searches/{task_id}"] - 1 - fan_ins + at_fan_in


def _counted_once(view: dict[str, Any]) -> None:
    """Every platform counted once, and the counters agree with the summary and the runs."""
    runs, summary = view["platform_runs"], view["summary"]
    not_succeeded = sum(1 for r in runs if r["state"] != "succeeded")
    assert view["counters"] == {"done": len(runs), "failed": not_succeeded}
    assert summary["platforms"] == len(runs) and summary["succeeded"] == len(runs) - not_succeeded
    assert summary["failed"] + summary["timed_out"] + summary["cancelled"] == not_succeeded
    assert summary["message"].endswith(f"({not_succeeded} failed)")


def test_a_burst_of_duplicate_deliveries_while_the_platform_runs_calls_the_provider_once(
    e2e: Cloud,
) -> None:
    accepted, worker, answers = _held_search(e2e)
    task_id = accepted["task_id"]
    body = {"task_id": task_id, "platform": "web_gate"}
    burst = concurrently([lambda: e2e.deliver("run_platform", body) for _ in range(BURST)])
    assert [(a.status_code, a.json()["error"]) for a in burst] == [(503, "lease_held")] * BURST
    assert all(int(a.headers["Retry-After"]) >= 1 for a in burst)
    assert e2e.stub.waiting("web_gate") == 1  # no duplicate reached the provider
    e2e.stub.release("web_gate")
    worker.join(60)

    assert [a.json()["outcome"] for a in answers] == ["succeeded"]
    view = e2e.wait(accepted)
    assert view["status"] == "completed" and view["counters"] == {"done": 2, "failed": 0}
    run = e2e.run_of(view, "web_gate")
    assert run["attempt"] == 1 and len(run["results"]) == 10
    assert e2e.stub.waiting("web_gate") == 1
    assert _finalizations(e2e, task_id, view) == 1


def test_a_late_progress_write_after_the_run_ended_does_not_change_it(e2e: Cloud) -> None:
    """The worker's own lease token, writing after its run succeeded, and after a cancel."""
    accepted = e2e.start({"query": "electrons", "platform": "docs,web_ok"})
    view = e2e.wait(accepted)
    task_id = accepted["task_id"]
    path = f"searches/{task_id}/platforms/web_ok"
    ended = e2e.platform_doc(task_id, "web_ok")
    assert ended["state"] == "succeeded" and ended["lease"]
    stamp, writes = e2e.doc(path).update_time, e2e.writes(task_id)
    late = {"stage": "compressing", "percent": 66.67, "message": "late"}
    assert not e2e.store.patch_run(task_id, "web_ok", late, lease=ended["lease"])
    assert e2e.platform_doc(task_id, "web_ok") == ended
    assert e2e.doc(path).update_time == stamp and e2e.writes(task_id) == writes
    assert view["status"] == "completed"


def test_a_cancelled_run_keeps_its_message_when_the_worker_reports_after(e2e: Cloud) -> None:
    accepted, worker, answers = _held_search(e2e)
    task_id = accepted["task_id"]
    cancelled = e2e.http.post(e2e.url("cancel_search"), json={"task_id": task_id})
    assert cancelled.status_code == 200, cancelled.text
    path = f"searches/{task_id}/platforms/web_gate"
    ended, stamp = e2e.platform_doc(task_id, "web_gate"), e2e.doc(path).update_time
    assert ended["state"] == "cancelled"
    e2e.stub.release("web_gate")  # the provider answers, the worker reports its progress
    worker.join(60)
    assert [a.json()["outcome"] for a in answers] == ["discarded"]
    assert e2e.platform_doc(task_id, "web_gate") == ended
    assert e2e.doc(path).update_time == stamp
    doc = e2e.task_doc(task_id)
    assert doc["status"] == "cancelled" and doc["counters"] == {"done": 2, "failed": 1}


def test_the_deadline_task_before_normal_completion_finalizes_once(e2e: Cloud) -> None:
    accepted, worker, answers = _held_search(e2e)
    task_id = accepted["task_id"]
    early = e2e.deliver("aggregate", {"task_id": task_id, "deadline": True})
    assert early.json()["outcome"] == "partial"
    e2e.stub.release("web_gate")
    worker.join(60)
    assert [a.json()["outcome"] for a in answers] == ["discarded"]
    again = e2e.deliver("aggregate", {"task_id": task_id, "deadline": True})
    assert again.json()["outcome"] == "already_final"
    view = e2e.status(task_id).json()
    assert e2e.run_of(view, "web_gate")["state"] == "timed_out"
    assert view["counters"] == {"done": 2, "failed": 1}
    assert view["summary"]["message"].endswith("(1 failed)")
    assert _finalizations(e2e, task_id, view) == 1


def test_the_deadline_task_during_normal_completion_finalizes_once(e2e: Cloud) -> None:
    accepted, worker, answers = _held_search(e2e)
    task_id = accepted["task_id"]
    deadline = {"task_id": task_id, "deadline": True}
    racing = concurrently(
        [lambda: e2e.deliver("aggregate", deadline), lambda: e2e.stub.release("web_gate")]
    )
    worker.join(60)
    view = e2e.wait(accepted)
    assert racing[0].status_code == 200 and answers[0].status_code == 200
    assert view["status"] in ("completed", "partial")
    assert view["counters"]["done"] == 2
    assert _finalizations(e2e, task_id, view) == 1


def test_the_deadline_task_after_normal_completion_changes_nothing(e2e: Cloud) -> None:
    accepted = e2e.start({"query": "electrons", "platform": "docs,web_ok"})
    view = e2e.wait(accepted)
    task_id = accepted["task_id"]
    late = e2e.deliver("aggregate", {"task_id": task_id, "deadline": True})
    assert late.json()["outcome"] == "already_final"
    assert e2e.status(task_id).json() == view
    assert view["status"] == "completed" and _finalizations(e2e, task_id, view) == 1


def test_a_firestore_stall_while_the_last_platform_fans_in_completes_the_search_once(
    e2e: Cloud,
) -> None:
    """The moment: web_gate waits at the provider, docs is done; Firestore stops, then the
    provider answers, so the worker's progress writes and its fan-in meet the stopped store."""
    accepted, worker, answers = _held_search(e2e)
    task_id = accepted["task_id"]
    # docs' fan-in is visible once committed, and in the write log a moment later (its process
    # logs after the commit returns): wait for the log too (start + fan-in), so `before` holds it.
    e2e.wait_until(lambda: e2e.writes(task_id)[f"searches/{task_id}"] == 2, what="docs' fan-in")
    before = e2e.writes(task_id)
    with e2e.firestore_stopped():
        e2e.stub.release("web_gate")
        worker.join(STALL_S)
        assert worker.is_alive() and not answers  # the worker's fan-in waits on the store
        assert e2e.writes(task_id) == before  # and nothing of it landed meanwhile
    worker.join(60)
    assert [(a.status_code, a.json()["outcome"]) for a in answers] == [(200, "succeeded")]
    view = e2e.wait(accepted)
    assert view["status"] == "completed"
    _counted_once(view)
    run = e2e.run_of(view, "web_gate")
    assert run["attempt"] == 1 and len(run["results"]) == 10  # nothing lost, nothing re-run
    assert e2e.stub.waiting("web_gate") == 1  # one provider call
    assert _finalizations(e2e, task_id, view) == 1


def test_a_firestore_stall_across_the_deadline_finalizes_the_search_partial_once(
    e2e: Cloud,
) -> None:
    """The deadline comes while Firestore is stopped: the deadline aggregate, and the web_gate
    worker whose own budget ran out at the provider, both wait on the store. Whichever lands
    first, web_gate ends `timed_out` and is counted once: by the worker's fan-in (its answer
    `timed_out`) or by the aggregate's finalization (the worker's answer `discarded`)."""
    accepted, worker, answers = _held_search(e2e, budget_s=BUDGET_S)
    task_id = accepted["task_id"]
    deadline = e2e.task_doc(task_id)["deadline_at"].timestamp()
    with e2e.firestore_stopped():
        stopped_at = time.time()
        time.sleep(STALL_S)
        assert stopped_at < deadline < time.time(), "the deadline did not fall in the stall"
    view = e2e.wait(accepted)
    e2e.stub.release("web_gate")
    worker.join(60)
    assert [a.status_code for a in answers] == [200]
    outcome = answers[0].json()["outcome"]
    assert outcome in ("timed_out", "discarded")
    assert e2e.status(task_id).json() == view  # nothing changed after the finalization
    assert view["status"] == "partial"
    assert e2e.run_of(view, "web_gate")["state"] == "timed_out"
    _counted_once(view)
    assert _finalizations(e2e, task_id, view, timed_out=int(outcome == "timed_out")) == 1


def _worker_pid(e2e: Cloud, target: str) -> int:
    """The process serving `target`'s requests: functions-framework runs gunicorn, whose master
    (the stack's child) forks one worker, and forks a new one when that worker dies, as Cloud
    Run starts a new instance."""
    master = next(f for f in e2e.stack.functions if f.target == target).process.pid
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def test_a_worker_killed_mid_run_is_taken_over_and_the_platform_completes_once(
    e2e: Cloud,
) -> None:
    """SIGKILL the worker while web_gate waits at the provider: Cloud Tasks' delivery fails and
    is retried; the retry is refused while the dead worker's lease lives (503, Retry-After),
    then takes the run over with attempt 2 once it lapses, well before the deadline."""
    accepted = e2e.start({"query": "electrons", "platform": "docs,web_gate"})
    task_id = accepted["task_id"]
    e2e.wait_until(lambda: e2e.stub.waiting("web_gate") == 1, what="web_gate at the provider")
    e2e.wait_until(
        lambda: e2e.run_of(e2e.status(task_id).json(), "docs")["state"] == "succeeded",
        what="docs done",
    )
    killed = _worker_pid(e2e, "run_platform")
    os.kill(killed, signal.SIGKILL)
    e2e.wait_until(
        lambda: e2e.stub.waiting("web_gate") == 2,
        timeout=LEASE_SECONDS + 30,
        what="the takeover's provider call",
    )
    taken = e2e.platform_doc(task_id, "web_gate")
    assert (taken["state"], taken["attempt"]) == ("running", 2)
    e2e.stub.release("web_gate")

    view = e2e.wait(accepted)
    assert view["status"] == "completed" and view["counters"] == {"done": 2, "failed": 0}
    run = e2e.run_of(view, "web_gate")
    assert run["attempt"] == 2 and len(run["results"]) == 10
    assert e2e.stub.waiting("web_gate") == 2  # the lost call and the takeover's: no third
    assert _finalizations(e2e, task_id, view) == 1
    assert _worker_pid(e2e, "run_platform") != killed
