"""A fallback chain's pure rules: when the turn passes (rules/chain.py), the turns as store
transactions (rules/handover.py), whose results are whose (rules/provenance.py), and the chain's
estimate at its dearest plausible path (pricing.chain_estimate)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fanfuse.platforms.pricing import PlatformEstimate, chain_estimate
from fanfuse.rules import chain, handover, provenance, spend
from fanfuse.rules.lifecycle import Outcome
from fanfuse.rules.mutations import Snapshot
from fanfuse.wire.chain import MemberRole, MemberRun, MemberState
from fanfuse.wire.cost import Cost
from fanfuse.wire.errors import LeaseHeld
from fanfuse.wire.models import (
    CallRecord,
    FailureKind,
    Hit,
    PlatformRun,
    PlatformState,
    QueryFailure,
    TaskStatus,
    utcnow,
)
from tests.support.fakes import make_task

NOW = utcnow()
LEASE = timedelta(seconds=30)


def failed(kind: FailureKind | None) -> Outcome:
    return Outcome(state=PlatformState.FAILED, error="google: HTTP 500", failure=kind)


@pytest.mark.parametrize(
    ("outcome", "passes"),
    [
        (failed(FailureKind.RATE_LIMITED), True),  # 429 after the retries
        (failed(FailureKind.DENIED), True),  # 401/402/403
        (failed(FailureKind.ERROR), True),  # 5xx, timeout, connection, malformed
        (failed(FailureKind.CAPTCHA), True),
        (failed(None), True),  # unclassified: the provider's, as the breaker takes it
        (Outcome(state=PlatformState.SUSPENDED), True),  # its breaker open
        (failed(FailureKind.QUERY), False),  # the caller's query, refused as asked
        (failed(FailureKind.NOT_ASKED), False),
        (failed(FailureKind.INTERNAL), False),
        (Outcome(state=PlatformState.CANCELLED), False),
        (Outcome(state=PlatformState.TIMED_OUT), False),  # the search's deadline
        (Outcome(state=PlatformState.SUCCEEDED), False),
    ],
)
def test_the_providers_failures_pass_the_turn_the_callers_do_not(
    outcome: Outcome, passes: bool
) -> None:
    assert chain.passes_turn(outcome) is passes


def test_an_answer_that_failed_some_queries_passes_those_on() -> None:
    failures = [
        QueryFailure(platform="g", query_index=1, query="b", error="HTTP 500", kind="error"),
        QueryFailure(platform="g", query_index=2, query="c", error="HTTP 400", kind="query"),
    ]
    answer = Outcome(state=PlatformState.SUCCEEDED, failed_queries=failures)
    assert chain.passed_queries(answer) == [1]
    assert chain.passes_turn(answer)
    assert chain.handover_message("google", answer, "brave") == (
        "google: 1 query failed, brave answering"
    )


def test_the_messages_a_user_reads() -> None:
    assert chain.handover_message("google", failed(FailureKind.RATE_LIMITED), "brave") == (
        "google: quota exhausted, brave answering"
    )
    assert chain.hedge_message("google", 0.5, "brave") == (
        "google: no answer after 0.5 s, brave asked too"
    )


def chained(**over: object) -> PlatformRun:
    base = {"task_id": "t", "name": "google", "index": 1, "of": 1, "chain": ["google", "brave"]}
    return PlatformRun.model_validate({**base, **over})


def snapshot(run: PlatformRun, status: TaskStatus = TaskStatus.RUNNING) -> Snapshot:
    task = make_task("t", ["google"])[0].model_copy(update={"status": status})
    return Snapshot(task=task, runs={run.name: run})


def test_a_delivery_claims_the_run_only_on_its_members_turn() -> None:
    first, second = chained(), chained(member=1)
    assert handover.claim("google", None, NOW, "a", lease=LEASE)(snapshot(first)) is not None
    assert handover.claim("google", "brave", NOW, "a", lease=LEASE)(snapshot(first)) is None
    # the turn has passed: a duplicate of google's task asks nobody
    assert handover.claim("google", None, NOW, "a", lease=LEASE)(snapshot(second)) is None
    assert handover.claim("google", "brave", NOW, "b", lease=LEASE)(snapshot(second))
    held = chained(member=1, state="running", lease="b", lease_until=NOW + LEASE)
    with pytest.raises(LeaseHeld):  # brave's own task delivered twice while it runs
        handover.claim("google", "brave", NOW, "c", lease=LEASE)(snapshot(held))
    assert handover.member_of(second) == "brave" and handover.member_of(first) is None


def test_a_hand_over_moves_the_turn_keeps_calls_and_gives_up_the_lease() -> None:
    running = chained(state="running", lease="a", lease_until=NOW + LEASE)
    member = MemberRun(
        name="google", role=MemberRole.PRIMARY, state=MemberState.FAILED, reason="HTTP 429"
    )
    call = CallRecord(platform="google", status=429, attempts=3)
    mutate = handover.hand_over(
        "google",
        "a",
        ended=[member],
        following=1,
        partial=[],
        calls=[call],
        message="google: quota exhausted, brave answering",
        now=NOW,
    )
    writes = mutate(snapshot(running))
    assert writes is not None
    [moved] = writes.runs
    assert (moved.member, moved.lease, moved.lease_until) == (1, None, None)
    assert moved.members == [member] and moved.calls == [call]
    assert moved.message == "google: quota exhausted, brave answering"
    assert mutate(snapshot(running.model_copy(update={"lease": "x"}))) is None  # not its lease
    assert mutate(snapshot(running, TaskStatus.CANCELLED)) is None


def test_the_last_turn_joins_what_earlier_turns_answered() -> None:
    early = Hit(url="https://a.example/1", query_index=0, metadata={"answered_by": "google"})
    running = chained(state="running", lease="b", member=1, results=[early])
    late = Hit(url="https://b.example/1", query_index=1, metadata={"answered_by": "brave"})
    member = MemberRun(name="brave", role=MemberRole.FALLBACK, state=MemberState.ANSWERED)
    answer = Outcome(state=PlatformState.SUCCEEDED, results=[late])
    writes = handover.finish("google", answer, [member], NOW, "b")(snapshot(running))
    assert writes is not None and writes.task is not None
    [ended] = writes.runs
    assert [h.url for h in ended.results] == [early.url, late.url]
    assert ended.answered_by == ["brave"] and ended.members == [member]
    assert writes.task.counters.done == 1


def test_fusion_takes_a_chains_results_as_the_answering_members() -> None:
    hits = provenance.tagged([Hit(url="https://b.example/1")], "brave")
    run = chained(results=hits, answered_by=["brave"], state="succeeded")
    plain = PlatformRun(task_id="t", name="docs", index=2, of=2, results=[Hit(url="d")])
    assert set(provenance.lists([run, plain])) == {"brave", "docs"}
    assert provenance.weights({"google": 2.0}, [run]) == {"google": 2.0, "brave": 2.0}
    assert provenance.weights({"google": 2.0, "brave": 0.5}, [run]) == {
        "google": 2.0,
        "brave": 0.5,  # its own weight wins
    }


def test_the_receipt_lists_each_members_calls_and_cost() -> None:
    calls = [
        CallRecord(platform="google", status=None, cost_usd=0.005, error="cancelled"),
        CallRecord(platform="brave", status=200, cost_usd=0.003),
        CallRecord(platform="brave", status=500),
    ]
    run = chained(calls=calls, state="succeeded")
    receipt = spend.receipt(Cost(), [run])
    google = receipt.platforms["google"]
    assert (google.calls, google.usd) == (2, 0.008)
    assert {n: (m.calls, m.usd) for n, m in google.members.items()} == {
        "google": (1, 0.005),
        "brave": (1, 0.003),
    }


def test_a_chain_is_priced_at_its_dearest_plausible_path() -> None:
    google = PlatformEstimate("google", calls=2, per_call_usd=0.005)
    brave = PlatformEstimate("brave", calls=2, per_call_usd=0.003)
    priced = chain_estimate("google", [google, brave])
    assert priced.usd == pytest.approx(0.016)  # every member asked and charged
    assert priced.share("google") == pytest.approx(0.625)
    assert priced.share("google") + priced.share("brave") == pytest.approx(1.0)
    free = chain_estimate("docs", [PlatformEstimate("docs", 0, 0.0)] * 2)
    assert free.usd == 0 and free.share("docs") == 0.5
