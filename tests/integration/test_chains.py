"""Fallback chains and hedged requests on the embedded runtime, against provider doubles (the
stub SearXNG on 127.0.0.1): a primary that refuses hands over to the next member as a queued
task; a slow one is hedged, the first good answer wins and the other is cancelled; a chain
whose every member fails fails with each one's reason; each member asked once, whatever is
delivered twice. The same on the emulator stack and moto: tests/e2e/test_e2e_chains.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from fanfuse.net.runner import Runner
from fanfuse.queue.port import PlatformMessage
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.chain import MemberRole, MemberState
from fanfuse.wire.cost import Price
from fanfuse.wire.errors import InvalidRequest, OverBudget
from fanfuse.wire.instances import ExtraPlatform
from fanfuse.wire.models import (
    BreakerState,
    FailureKind,
    PlatformHealth,
    PlatformState,
    TaskStatus,
    utcnow,
)

pytestmark = pytest.mark.timeout(90)

DOUBLES = {
    "web_401": "status/401",
    "web_429": "status/429",
    "web_500": "status/500",
    "web_ok": "delay/0",
    "web_fast": "delay/0.2",
    "web_slow": "delay/3",
    "web_flaky": "fail-query/zz500",
    "web_gate": "gate/fallback",
}
PRICES = {"web_slow": Price(per_request_usd=0.005), "web_fast": Price(per_request_usd=0.003)}


@pytest.fixture(scope="module")
def stub() -> Iterator[StubSearxServer]:
    with StubSearxServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _clean(stub: StubSearxServer) -> Iterator[None]:
    stub.reset()
    yield
    stub.reset()


def platforms(stub: StubSearxServer) -> dict[str, ExtraPlatform]:
    """One searxng double per behaviour; three attempts (the runner fixture does not sleep)."""
    return {
        name: ExtraPlatform(engine="searxng", settings={"base_url": stub.url(path)})
        for name, path in DOUBLES.items()
    }


@asynccontextmanager
async def runtime(
    stub: StubSearxServer, tmp_path: Path, runner: Runner, **settings: Any
) -> AsyncIterator[EmbeddedRuntime]:
    config = Settings(
        db_path=tmp_path / "fanfuse.db",
        extra_platforms=platforms(stub),
        progress_interval=0.0,
        deadline_seconds=30,
        prices=PRICES,
        **settings,
    )
    async with EmbeddedRuntime(config, runner=runner) as rt:
        yield rt


def search_body(platform: str, **fields: Any) -> dict[str, Any]:
    return {"query": "permittivity", "platform": platform, "cache": "bypass", **fields}


def asked(stub: StubSearxServer, name: str) -> int:
    """Page-1 requests the double `name` received."""
    return stub.requests[DOUBLES[name]]


@pytest.mark.parametrize(
    ("primary", "kind", "says"),
    [
        ("web_401", FailureKind.DENIED, "HTTP 401: credentials rejected"),
        ("web_429", FailureKind.RATE_LIMITED, "gave up after 3 attempt(s)"),
        ("web_500", FailureKind.ERROR, "HTTP 500"),
    ],
)
async def test_a_refusing_primary_hands_over_and_the_fallback_answers_visibly(
    stub: StubSearxServer,
    tmp_path: Path,
    runner: Runner,
    primary: str,
    kind: FailureKind,
    says: str,
) -> None:
    async with runtime(stub, tmp_path, runner) as rt:
        view = await rt.search(search_body(f"{primary}|web_ok"))
    assert view.status is TaskStatus.COMPLETED
    [run] = view.platform_runs
    assert run.name == primary and run.state is PlatformState.SUCCEEDED
    assert run.answered_by == ["web_ok"] and run.attempt == 2  # the fallback: its own delivery
    refused, answered = run.members
    assert (refused.name, refused.role, refused.state) == (
        primary,
        MemberRole.PRIMARY,
        MemberState.FAILED,
    )
    assert refused.failure is kind and refused.reason is not None and says in refused.reason
    assert (answered.name, answered.role, answered.state) == (
        "web_ok",
        MemberRole.FALLBACK,
        MemberState.ANSWERED,
    )
    assert answered.results == len(run.results) == 10
    # provenance: every result is the fallback's, by name
    assert view.results and all(r.platforms == ["web_ok"] for r in view.results)
    assert {c.platform for c in run.calls} == {primary, "web_ok"}
    retried = primary != "web_401"  # 429 and 5xx: the runner's three attempts
    assert asked(stub, primary) == (3 if retried else 1) and asked(stub, "web_ok") == 1


async def test_the_hand_over_says_who_failed_and_who_answers_while_it_answers(
    stub: StubSearxServer, tmp_path: Path, runner: Runner
) -> None:
    async with runtime(stub, tmp_path, runner) as rt:
        accepted = rt.service.start(search_body("web_429|web_gate"))
        for _ in range(500):  # bounded: the fallback reaches its gate in well under 5 s
            if stub.waiting("fallback"):
                break
            await asyncio.sleep(0.01)
        running = rt.service.status(accepted.task_id)
        [run] = running.platform_runs
        assert run.message == "web_429: quota exhausted, web_gate answering"
        assert run.state is PlatformState.RUNNING and run.member == 1
        stub.release("fallback")
        view = await rt.wait(accepted.task_id)
    assert view.status is TaskStatus.COMPLETED
    assert view.platform_runs[0].answered_by == ["web_gate"]


async def test_a_cancel_while_the_fallback_answers_ends_the_run_and_asks_no_one_else(
    stub: StubSearxServer, tmp_path: Path, runner: Runner
) -> None:
    async with runtime(stub, tmp_path, runner) as rt:
        accepted = rt.service.start(search_body("web_500|web_gate|web_ok"))
        for _ in range(500):
            if stub.waiting("fallback"):
                break
            await asyncio.sleep(0.01)
        view = rt.service.cancel(accepted.task_id)
        ended = asyncio.ensure_future(rt.delivered(accepted.task_id, 10))
        stub.release("fallback")
        await ended  # web_gate's delivery saw the cancel after its call, and stopped
        await asyncio.sleep(0.2)  # a hand-over to web_ok, were there one, would be queued now
        final = rt.service.status(accepted.task_id)
    assert view.status is TaskStatus.CANCELLED and final.status is TaskStatus.CANCELLED
    assert final.platform_runs[0].state is PlatformState.CANCELLED
    assert asked(stub, "web_ok") == 0


async def test_a_slow_primary_is_hedged_and_cancelled_and_both_calls_are_paid(
    stub: StubSearxServer, tmp_path: Path, runner: Runner
) -> None:
    """Primary 3 s, hedge after 0.5 s: the final answer within 1 s of the fallback's."""
    async with runtime(stub, tmp_path, runner) as rt:
        started = time.monotonic()
        view = await rt.search(search_body("web_slow|web_fast", hedge_after_s=0.5))
        ended = time.monotonic()
    fast_arrived = stub.arrivals[DOUBLES["web_fast"]][0]
    assert fast_arrived - started >= 0.5  # the hedge waited for the primary
    fallback_answered = fast_arrived + 0.2
    assert ended - fallback_answered < 1.0
    assert ended - started < 3.0  # never waited out the primary
    assert view.status is TaskStatus.COMPLETED
    [run] = view.platform_runs
    assert run.answered_by == ["web_fast"]
    slow, fast = run.members
    assert slow.state is MemberState.CANCELLED
    assert slow.reason == "cancelled: web_fast answered first"
    assert (fast.role, fast.state) == (MemberRole.HEDGE, MemberState.ANSWERED)
    [slow_call] = [c for c in run.calls if c.platform == "web_slow"]
    assert slow_call.error == "cancelled before the answer" and slow_call.status is None
    receipt = view.cost.platforms["web_slow"]
    assert {n: (m.calls, m.usd) for n, m in receipt.members.items()} == {
        "web_slow": (1, 0.005),  # cancelled, but the provider took the call
        "web_fast": (1, 0.003),
    }
    assert view.cost.total_usd == pytest.approx(0.008)
    assert all(r.platforms == ["web_fast"] for r in view.results)


async def test_a_chain_whose_every_member_fails_fails_with_each_ones_reason(
    stub: StubSearxServer, tmp_path: Path, runner: Runner
) -> None:
    async with runtime(stub, tmp_path, runner) as rt:
        view = await rt.search(search_body("web_500|web_401|web_429"))
    assert view.status is TaskStatus.FAILED
    [run] = view.platform_runs
    assert run.state is PlatformState.FAILED and run.answered_by == []
    assert [(m.name, m.state, m.failure) for m in run.members] == [
        ("web_500", MemberState.FAILED, FailureKind.ERROR),
        ("web_401", MemberState.FAILED, FailureKind.DENIED),
        ("web_429", MemberState.FAILED, FailureKind.RATE_LIMITED),
    ]
    assert run.error is not None and run.error.startswith("every member of the chain failed")
    for member, says in (("web_500", "HTTP 500"), ("web_401", "HTTP 401"), ("web_429", "HTTP 429")):
        assert f"{member}: {says}" in run.error
    assert view.error is not None and "web_401: HTTP 401" in view.error
    assert run.attempt == 3  # one queued delivery a member


async def test_a_query_the_primary_fails_is_passed_on_alone(
    stub: StubSearxServer, tmp_path: Path, runner: Runner
) -> None:
    body = search_body("web_flaky|web_ok", query=["permittivity", "other zz500"])
    async with runtime(stub, tmp_path, runner) as rt:
        view = await rt.search(body)
    assert view.status is TaskStatus.COMPLETED
    [run] = view.platform_runs
    assert run.answered_by == ["web_flaky", "web_ok"] and run.failed_queries == []
    flaky, ok = run.members
    assert (flaky.queries, flaky.answered, ok.queries, ok.answered) == ([0, 1], [0], [1], [1])
    first, second = view.results_by_query
    assert {r.platform for r in first.results} == {"web_flaky"}
    assert {r.platform for r in second.results} == {"web_ok"}


async def test_an_open_breaker_passes_the_turn_at_once_with_no_call(
    stub: StubSearxServer, tmp_path: Path, runner: Runner
) -> None:
    async with runtime(stub, tmp_path, runner) as rt:
        now = utcnow()
        rt.service.store.update_health(
            "web_500",
            lambda _: PlatformHealth(
                name="web_500",
                updated_at=now,
                state=BreakerState.OPEN,
                reason=FailureKind.ERROR,
                retry_at=now.replace(year=now.year + 1),
            ),
        )
        view = await rt.search(search_body("web_500|web_ok"))
    [run] = view.platform_runs
    skipped, answered = run.members
    assert skipped.state is MemberState.SKIPPED and "suspended after error" in (
        skipped.reason or ""
    )
    assert answered.state is MemberState.ANSWERED and run.attempt == 1  # same delivery
    assert asked(stub, "web_500") == 0


async def test_a_member_that_cannot_run_here_is_passed_over_without_a_task(
    stub: StubSearxServer,
    tmp_path: Path,
    runner: Runner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """google has no key here: the hand-over goes past it to web_ok, saying why."""
    monkeypatch.delenv("FANFUSE_GOOGLE_API_KEY", raising=False)
    async with runtime(stub, tmp_path, runner) as rt:
        view = await rt.search(search_body("web_500|google|web_ok"))
    [run] = view.platform_runs
    assert [(m.name, m.state) for m in run.members] == [
        ("web_500", MemberState.FAILED),
        ("google", MemberState.SKIPPED),
        ("web_ok", MemberState.ANSWERED),
    ]
    assert "FANFUSE_GOOGLE_API_KEY" in (run.members[1].reason or "")
    assert run.attempt == 2 and run.answered_by == ["web_ok"]  # no delivery for google


async def test_duplicate_deliveries_ask_no_member_twice(
    stub: StubSearxServer, tmp_path: Path, runner: Runner
) -> None:
    async with runtime(stub, tmp_path, runner) as rt:
        view = await rt.search(search_body("web_500|web_ok"))
        task_id = view.task_id
        again = [
            PlatformMessage(task_id=task_id, platform="web_500"),
            PlatformMessage(task_id=task_id, platform="web_500", member="web_ok"),
        ]
        answers = [await rt.service.run_platform(m) for m in again * 2]
        assert answers == ["skipped"] * 4
        assert rt.service.status(task_id).platform_runs[0] == view.platform_runs[0]
    assert (asked(stub, "web_500"), asked(stub, "web_ok")) == (3, 1)  # 3: its own retries


async def test_a_duplicate_of_a_turn_that_passed_while_the_next_runs_asks_nobody(
    stub: StubSearxServer, tmp_path: Path, runner: Runner
) -> None:
    async with runtime(stub, tmp_path, runner) as rt:
        accepted = rt.service.start(search_body("web_500|web_gate"))
        for _ in range(500):
            if stub.waiting("fallback"):
                break
            await asyncio.sleep(0.01)
        stale = PlatformMessage(task_id=accepted.task_id, platform="web_500")
        assert await rt.service.run_platform(stale) == "skipped"
        stub.release("fallback")
        view = await rt.wait(accepted.task_id)
    assert view.status is TaskStatus.COMPLETED
    assert (asked(stub, "web_500"), stub.waiting("fallback")) == (3, 1)  # 3: its retries


async def test_without_a_request_hedge_the_members_recent_p90_is_the_hedge(
    stub: StubSearxServer, tmp_path: Path, runner: Runner
) -> None:
    async with runtime(stub, tmp_path, runner) as rt:
        now = utcnow()
        rt.service.store.update_health(
            "web_slow",
            lambda _: PlatformHealth(
                name="web_slow", latency_s=0.3, samples=10, recent_s=[0.3] * 10, updated_at=now
            ),
        )
        started = time.monotonic()
        view = await rt.search(search_body("web_slow|web_fast"))
    hedged_at = stub.arrivals[DOUBLES["web_fast"]][0] - started
    assert 0.3 <= hedged_at < 2.0
    assert view.platform_runs[0].members[1].role is MemberRole.HEDGE


async def test_a_deployments_chain_groups_all_and_hedges_as_configured(
    stub: StubSearxServer, tmp_path: Path, runner: Runner
) -> None:
    chains = {"web_slow": {"fallbacks": ["web_fast"], "hedge_after_s": 0.4}}
    async with runtime(stub, tmp_path, runner, chains=chains) as rt:
        request = rt.service.validate({"query": "q", "platform": "all"})
        assert "web_slow|web_fast" in request.platform and "web_fast" not in request.platforms
        view = await rt.search(search_body("web_slow"))
    [run] = view.platform_runs
    assert run.chain == ["web_slow", "web_fast"] and run.answered_by == ["web_fast"]


async def test_budgets_price_a_chain_at_its_dearest_path_and_say_so(
    stub: StubSearxServer, tmp_path: Path, runner: Runner
) -> None:
    async with runtime(stub, tmp_path, runner) as rt:
        with pytest.raises(OverBudget) as refused:
            rt.service.start(search_body("web_slow|web_fast", max_cost_usd=0.006))
        message = str(refused.value)
        assert "$0.008" in message  # 0.005 + 0.003: both asked and charged
        assert "(web_slow|web_fast) is estimated at its dearest plausible path" in message
        both = search_body("web_slow|web_fast, web_ok", max_cost_usd=0.006, budget="trim")
        accepted = rt.service.start(both)
        trimmed = rt.service.status(accepted.task_id).cost
        assert trimmed.trimmed == ["web_slow|web_fast"]
        view = await rt.wait(accepted.task_id)
        kept = await rt.search(search_body("web_slow|web_fast", hedge_after_s="off"))
    assert [r.name for r in view.platform_runs] == ["web_ok"]
    assert kept.cost.platforms["web_slow"].chain == ["web_slow", "web_fast"]
    assert kept.cost.platforms["web_slow"].estimate_usd == pytest.approx(0.008)


async def test_a_chain_of_unknown_or_unrunnable_members_is_a_400(
    stub: StubSearxServer, tmp_path: Path, runner: Runner
) -> None:
    async with runtime(stub, tmp_path, runner) as rt:
        with pytest.raises(InvalidRequest) as refused:
            rt.service.start(search_body("web_ok|nope"))
        assert refused.value.problems[0].field == "platform"
        assert "unknown platform 'nope'" in refused.value.problems[0].problem
