"""One delivery's turn of a fallback chain: the members it asks, hedged, and how it ends.

The member whose turn it is is asked first; a member that cannot be asked (its settings, its
breaker open) is passed over at once, noted, no call made. The next member is asked too when
the one asked last has not finished its searching stage after `hedge_after_s` (a hedge), or
when a member fails, for reasons that pass the turn, while another still runs. The first good
answer wins and the others are cancelled (asyncio cancellation closes their connections; the
runner records each cancelled call, and charges it). The turn ends with the run's outcome
(`Finished`: answered, or every member failed) or a hand-over to the next member as its own
queued task (`Handover`: every member asked failed and passed the turn, or the answer left
queries that passed; chains.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from fanfuse.platforms.contract import RunRecord
from fanfuse.rules import breaker, chain
from fanfuse.rules.lifecycle import Outcome
from fanfuse.rules.limits import Budget
from fanfuse.rules.provenance import tagged
from fanfuse.service.circuit import Circuit, suspended
from fanfuse.service.execute import Assignment, Executor
from fanfuse.wire.chain import MemberRole, MemberRun, MemberState
from fanfuse.wire.models import (
    CallRecord,
    FailureKind,
    Hit,
    PlatformRun,
    PlatformState,
    QueryFailure,
    Stage,
    Task,
    utcnow,
)


@dataclass
class Handover:
    """The delivery ends with the turn passed to member `following` (its own queued task)."""

    ended: list[MemberRun]
    following: int
    partial: list[Hit]
    calls: list[CallRecord]
    message: str


@dataclass
class Finished:
    """The chain has answered, or run out: the run's outcome, and the members of this turn."""

    outcome: Outcome
    ended: list[MemberRun]


Step = Handover | Finished


@dataclass
class Asked:
    """One member asked in this delivery."""

    name: str
    role: MemberRole
    gate: breaker.Gate
    record: RunRecord
    queries: list[int]
    started: float
    started_at: datetime


class Turn:
    """The members one delivery asks, and how their answers become the run's step."""

    def __init__(
        self,
        task: Task,
        run: PlatformRun,
        stop: Callable[[], bool],
        *,
        queries: list[int],
        calls: Budget,
        shares: dict[str, float],
        executor: Executor,
        circuit: Circuit,
        note: Callable[[PlatformRun, str], None],
        unavailable: Callable[[str], str | None],
        abort: asyncio.Event | None = None,
    ) -> None:
        """`queries`: the task's queries no earlier turn answered; `calls`: the run's share of
        the search's provider calls left; `shares`: each member's part of the run's money;
        `note`: writes a message on the run's document; `unavailable`: why a member cannot be
        asked here (None: it can); `abort`: once set, cuts the members' calls in flight (a
        cancel in this process: ledger.InFlight)."""
        self.task, self.run, self.stop, self.abort = task, run, stop, abort
        self.queries, self.calls, self.shares = queries, calls, shares
        self.executor, self.circuit, self.note, self.unavailable = (
            executor,
            circuit,
            note,
            unavailable,
        )
        self.members = run.chain
        self.next = run.member
        self.ended: list[MemberRun] = []
        self.asked: list[Asked] = []
        self.running: dict[asyncio.Task[Outcome], Asked] = {}
        self.passing: Outcome | None = None
        """The last end that passed the turn (for the hand-over's message)."""
        self.last: Outcome | None = None
        """The last member's end that was not an answer (how a chain that ran out ends)."""

    async def play(self, hedge: float | None) -> Step:
        winner: tuple[Asked, Outcome] | None = None
        try:
            self.ask(MemberRole.PRIMARY)
            while self.running and winner is None:
                done, _ = await asyncio.wait(
                    self.running,
                    timeout=self._hedge_in(hedge),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if not done:
                    assert hedge is not None  # a timeout only with a hedge
                    latest = self._latest()
                    following = self.members[self.next]
                    self.note(self.run, chain.hedge_message(latest.name, hedge, following))
                    self.ask(MemberRole.HEDGE)
                    continue
                winner, passed = self._ended(done)
                if winner is None and passed and self.running:
                    self.ask(MemberRole.FALLBACK)  # another still runs: no hand-over yet
        finally:
            await self._cancel_rest(winner)
        return self._step(winner)

    def _hedge_in(self, hedge: float | None) -> float | None:
        """Seconds until the hedge is due (None: no hedge): while a member is left to ask and
        the member asked last is still searching (one that answered is fetching pages)."""
        if hedge is None or self.next >= len(self.members) or not self.running:
            return None
        latest = self._latest()
        if Stage.SEARCHING.value in latest.record.timings:
            return None
        return max(0.0, latest.started + hedge - time.monotonic())

    def _latest(self) -> Asked:
        """The member asked last among those still running."""
        return max(self.running.values(), key=lambda asked: asked.started)

    def ask(self, role: MemberRole) -> None:
        """Ask the next member that can be asked, passing over (and noting) those that cannot."""
        while self.next < len(self.members):
            index, name = self.next, self.members[self.next]
            self.next += 1
            if index == 0:
                role = MemberRole.PRIMARY
            elif role is MemberRole.PRIMARY:
                role = MemberRole.FALLBACK
            gate = breaker.Gate(breaker.Verdict.CALL)
            why = self.unavailable(name)
            if why is None:
                gate = self.circuit.admit(name)
                if gate.verdict is breaker.Verdict.SUSPENDED:
                    why = (suspended(name, gate).error or "").removeprefix(f"{name}: ")
            if why is not None:
                self._pass_over(name, role, why)
                continue
            record = RunRecord()
            member = Assignment(name, self.queries, record, self.calls, self.shares.get(name, 1.0))
            work = asyncio.create_task(
                self.executor.run(self.task, self.run, self.stop, member, self.abort)
            )
            asked = Asked(name, role, gate, record, self.queries, time.monotonic(), utcnow())
            self.running[work] = asked
            self.asked.append(asked)
            return

    def _pass_over(self, name: str, role: MemberRole, why: str) -> None:
        self.ended.append(
            MemberRun(
                name=name,
                role=role,
                state=MemberState.SKIPPED,
                reason=why,
                queries=self.queries,
                started_at=utcnow(),
            )
        )
        following = self.members[self.next] if self.next < len(self.members) else None
        self.note(self.run, chain.skipped_message(name, why, following))

    def _ended(self, done: set[asyncio.Task[Outcome]]) -> tuple[tuple[Asked, Outcome] | None, bool]:
        """Take the members that ended: the first good answer wins; the others are noted.
        Also whether one of them passed the turn."""
        winner: tuple[Asked, Outcome] | None = None
        passed = False
        for work in done:
            asked = self.running.pop(work)
            outcome = work.result()
            self._observe(asked, outcome)
            if outcome.state is PlatformState.SUCCEEDED:
                if winner is None:
                    winner = (asked, outcome)
                else:  # two answers at once: the first taken is used
                    unused = dataclasses.replace(
                        outcome, error=f"not used: {winner[0].name} answered first"
                    )
                    self.ended.append(self._member(asked, unused, MemberState.CANCELLED))
                continue
            cancelled = outcome.state is PlatformState.CANCELLED  # the search's cancel
            state = MemberState.CANCELLED if cancelled else MemberState.FAILED
            self.ended.append(self._member(asked, outcome, state))
            self.last = outcome
            if chain.passes_turn(outcome):
                self.passing, passed = outcome, True
        return winner, passed

    async def _cancel_rest(self, winner: tuple[Asked, Outcome] | None) -> None:
        """Cancel the members still running (a winner answered first, or this delivery is
        stopping) and keep what each did: its calls are made and recorded."""
        rest = dict(self.running)
        self.running.clear()
        for work in rest:
            work.cancel()
        await asyncio.gather(*rest, return_exceptions=True)
        first = winner[0].name if winner is not None else None
        for asked in rest.values():
            why = f"cancelled: {first} answered first" if first else "cancelled"
            outcome = Outcome(state=PlatformState.CANCELLED, error=why, calls=asked.record.calls)
            self._observe(asked, outcome)
            self.ended.append(self._member(asked, outcome, MemberState.CANCELLED))

    def _observe(self, asked: Asked, outcome: Outcome) -> None:
        """The member's own breaker and latency (a cancelled one's say nothing, but a probe
        it held is given back)."""
        self.circuit.record(asked.name, outcome, asked.gate)
        self.circuit.observe_latency(asked.name, outcome)

    def _member(self, asked: Asked, outcome: Outcome, state: MemberState) -> MemberRun:
        failed = {f.query_index for f in outcome.failed_queries}
        answered = [q for q in asked.queries if q not in failed]
        won = state is MemberState.ANSWERED
        why = (outcome.error or outcome.state.value).removeprefix(f"{asked.name}: ")
        return MemberRun(
            name=asked.name,
            role=asked.role,
            state=state,
            reason=None if won else why,
            failure=None if won else outcome.failure,
            queries=asked.queries,
            answered=answered if won else [],
            results=len(outcome.results) if won else 0,
            calls=len(asked.record.calls),
            cost_usd=round(sum(c.cost_usd for c in asked.record.calls), 6),
            started_at=asked.started_at,
            seconds=round(time.monotonic() - asked.started, 4),
        )

    # -- the step ---------------------------------------------------------------------------

    def _calls(self) -> list[CallRecord]:
        return [call for asked in self.asked for call in asked.record.calls]

    def _step(self, winner: tuple[Asked, Outcome] | None) -> Step:
        if winner is not None:
            asked, outcome = winner
            self.ended.append(self._member(asked, outcome, MemberState.ANSWERED))
            hits = tagged(outcome.results, asked.name)
            following = self._askable() if chain.passed_queries(outcome) else None
            if following is not None:
                message = chain.handover_message(asked.name, outcome, self.members[following])
                return Handover(self._in_order(), following, hits, self._calls(), message)
            answer = dataclasses.replace(outcome, results=hits, calls=self._calls())
            return Finished(answer, self._in_order())
        if self.passing is not None:
            last = next(m for m in reversed(self.ended) if m.state is not MemberState.ANSWERED)
            following = self._askable()
            if following is not None:
                message = chain.handover_message(last.name, self.passing, self.members[following])
                return Handover(self._in_order(), following, [], self._calls(), message)
        return Finished(self._ran_out(), self._in_order())

    def _askable(self) -> int | None:
        """The next member a hand-over may go to: those that cannot run here are passed over
        now (noted), so no task goes to a queue that has no worker for them."""
        while self.next < len(self.members):
            name = self.members[self.next]
            why = self.unavailable(name)
            if why is None:
                return self.next
            self.next += 1
            self._pass_over(name, MemberRole.FALLBACK, why)
        return None

    def _in_order(self) -> list[MemberRun]:
        return sorted(self.ended, key=lambda m: self.members.index(m.name))

    def _ran_out(self) -> Outcome:
        """No member answered in this turn: the run succeeds with what earlier turns answered
        (the rest failed queries), else fails with every member's reason."""
        ended = [*self.run.members, *self._in_order()]
        error = chain.error_of(ended)
        state = PlatformState.FAILED
        if self.last is not None and self.last.state in (
            PlatformState.TIMED_OUT,
            PlatformState.CANCELLED,
        ):
            state = self.last.state  # the search's deadline, or a cancel: not the members'
        if self.run.results and state is PlatformState.FAILED:
            failures = [
                QueryFailure(
                    platform=self.run.name,
                    query_index=qi,
                    query=self.task.queries[qi],
                    error=error,
                    kind=chain.failure_of(ended),
                )
                for qi in self.queries
            ]
            return Outcome(
                state=PlatformState.SUCCEEDED, failed_queries=failures, calls=self._calls()
            )
        everyone_skipped = all(m.state is MemberState.SKIPPED for m in self.ended)
        return Outcome(
            state=state,
            error=f"every member of the chain failed: {error}",
            calls=self._calls(),
            failure=FailureKind.NOT_ASKED if everyone_skipped else chain.failure_of(ended),
        )
