"""A fallback chain's turns as store transactions: a member's claim, the hand-over, the end.

The mutators of `lifecycle.py`, for a run whose members take turns (rules/chain.py). The run
document holds whose turn it is (`member`, an index into `chain`); each turn is one delivery of
`{task_id}--{run}--{member}` (the first member's is the run's own task). Exactly once, per
member: a delivery claims the run only on its member's turn (`claim`), under the lease that
`lifecycle.claim` gives, so a duplicate delivery of a member whose turn has passed asks nobody,
one of the member whose turn it is while it runs meets the live lease (LeaseHeld, retried), and
a hand-over (`hand_over`) moves the turn and gives up the lease in one write, from the lease
holder only, so two workers can never both hand over, nor both finish.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from fanfuse.rules import lifecycle, progress, spend
from fanfuse.rules.mutations import Mutator, Snapshot, Writes
from fanfuse.wire.chain import MemberRun, MemberState
from fanfuse.wire.models import CallRecord, Hit, PlatformRun, Stage


def member_of(run: PlatformRun) -> str | None:
    """The member whose turn it is, as its task names it (None: the run's first turn)."""
    if not run.chain or run.member == 0 or run.member >= len(run.chain):
        return None
    return run.chain[run.member]


def turn_of(run: PlatformRun, member: str | None) -> bool:
    """Whether a delivery for `member` (None: the run's first) is the run's current turn."""
    if not run.chain:
        return member is None or member == run.name
    asked = member or run.chain[0]
    return run.member < len(run.chain) and run.chain[run.member] == asked


def claim(name: str, member: str | None, now: datetime, token: str, *, lease: timedelta) -> Mutator:
    """`lifecycle.claim`, on `member`'s turn only: a delivery of a member whose turn has passed
    (or has not come) changes nothing and calls no one. A later member's claim keeps the
    hand-over's message (`google: quota exhausted, brave answering`) for the user to read."""
    claim_run = lifecycle.claim(name, now, token, lease=lease)

    def mutate(snap: Snapshot) -> Writes | None:
        run = snap.runs.get(name)
        if run is not None and not run.state.terminal and not turn_of(run, member):
            return None
        writes = claim_run(snap)
        if writes is not None and run is not None and run.chain and run.member > 0:
            writes.runs = [r.model_copy(update={"message": run.message}) for r in writes.runs]
        return writes

    return mutate


def answered(ended: list[MemberRun]) -> list[str]:
    return [m.name for m in ended if m.state is MemberState.ANSWERED]


def hand_over(
    name: str,
    token: str,
    *,
    ended: list[MemberRun],
    following: int,
    partial: list[Hit],
    calls: list[CallRecord],
    message: str,
    now: datetime,
) -> Mutator:
    """The turn to member `following`: the members this delivery asked (`ended`), what they
    answered (`partial`, some queries) and every call they made are kept on the run, and the
    lease is given up for the next member's delivery. From the lease holder of a running run
    of a running search only; None otherwise (a cancel or the deadline ended it meanwhile)."""

    def mutate(snap: Snapshot) -> Writes | None:
        task, run = snap.task, snap.runs[name]
        if task.status.terminal or run.state.terminal or run.lease != token:
            return None
        hits, contents = lifecycle._store_contents(partial)
        moved = run.model_copy(
            update={
                "member": following,
                "members": [*run.members, *ended],
                "answered_by": [*run.answered_by, *answered(ended)],
                "results": [*run.results, *hits],
                "calls": [*run.calls, *calls],
                "held_calls": spend.settled_holds(run, calls),  # answered: now records
                "lease": None,
                "lease_until": None,
                "stage": progress.stage_name(name, Stage.SEARCHING.value, run.of),
                "message": progress.platform_message(run.index, run.of, name, message),
                "updated_at": now,
            }
        )
        return Writes(runs=[moved], contents=contents)

    return mutate


def finish(
    name: str, outcome: lifecycle.Outcome, ended: list[MemberRun], now: datetime, token: str
) -> Mutator:
    """`lifecycle.finish` for a chain's last turn: its results joined to those earlier members
    gave (some queries each), and every member's turn on the run."""

    def mutate(snap: Snapshot) -> Writes | None:
        run = snap.runs[name]
        joined = lifecycle.Outcome(**{**vars(outcome), "results": [*run.results, *outcome.results]})
        writes = lifecycle.finish(name, joined, now, token)(snap)
        if writes is None:
            return None
        chain_fields = {
            "members": [*run.members, *ended],
            "answered_by": [*run.answered_by, *answered(ended)],
        }
        writes.runs = [
            r.model_copy(update=chain_fields) if r.name == name else r for r in writes.runs
        ]
        return writes

    return mutate
