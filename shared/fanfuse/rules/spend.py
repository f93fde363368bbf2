"""What a search cost: the spend ledger of its provider calls and the receipt summed from it
(pure functions; the mutators run in a store transaction on the task and one platform document).

A cent spent is a cent counted
------------------------------
A priced provider call is counted before it is sent: its worker writes a hold on the run's
platform document (`hold`, a `HeldCall` at the dearest the call can cost), and the request leaves
only once that write committed; nothing is awaited between the two. The hold is refused once the
run is no longer the worker's (a cancel or the deadline ended it, another delivery took it over):
then the call is not sent at all. When the run's worker finishes, its call records land on the
document and the holds they answer are dropped in the same write (`settled_holds`): a record
says what the call cost (`CallRecord.cost_usd`: its price when the provider answered with a 2xx,
0 when it refused, its held price when it was sent and no answer came back, which the provider
may still bill).

So at every instant each call the provider may bill is on the document, as a record or a hold,
and the receipt (`receipt`) counts both: the cancel and the finalization, which sum the receipt
in the transaction that makes the search terminal, count the calls still in flight, and the
daily budget is settled to that sum (rules/budget.py), never released while a call may still be
billed. A worker that finishes after its search was finalized still settles its holds into its
records (`settle_late`), and the receipt (and the day, by the difference) follows. A worker that
was killed mid-call leaves its hold behind: it stays counted, once, at its price.

A run keeps at most `net.runner.MAX_RECORDED_CALLS` (200) call records; the per-search call cap
(`FANFUSE_MAX_PROVIDER_CALLS_PER_SEARCH`, 100 by default, shared by the platforms) stays under it.
A call whose record did not fit keeps its hold, so it stays counted at its held price.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from fanfuse.rules.mutations import Mutator, Snapshot, Writes
from fanfuse.rules.provenance import member_spend
from fanfuse.wire.cost import Cost, MemberCost, PlatformCost
from fanfuse.wire.models import CallRecord, HeldCall, PlatformRun, PlatformState

USD_PLACES = 6
"""Prices are fractions of a cent (a tenth of a cent a call is common): six places keep them
exact enough to add up, and the sum free of float noise."""


def usd(amount: float) -> float:
    """An amount rounded for a document (floats summed in any order give the same figure)."""
    return round(amount, USD_PLACES)


def _counted(run: PlatformRun) -> tuple[int, float]:
    """A run's charged calls and dollars: its records that cost something, and its holds that
    no record settled yet (in flight, or left by a worker that died)."""
    charged = [c.cost_usd for c in run.calls if c.cost_usd > 0]
    recorded = {c.hold for c in run.calls if c.hold is not None}
    held = [h.usd for h in run.held_calls if h.id not in recorded]
    return len(charged) + len(held), sum(charged) + sum(held)


def committed(run: PlatformRun) -> float:
    """What a run's calls so far count for (records and holds, every attempt's): what a new
    attempt, after a takeover, has already spent of the run's share of the money."""
    return usd(_counted(run)[1])


def receipt(cost: Cost, runs: Iterable[PlatformRun]) -> Cost:
    """`cost` (the estimate and budget the search was admitted with) with each of `runs`'
    charged calls and dollars, records and holds, and the total over every platform."""
    platforms = dict(cost.platforms)
    for run in runs:
        calls, dollars = _counted(run)
        before = platforms.get(run.name, PlatformCost())
        members = {  # settled calls, by the member that made them (a hold names no member)
            name: MemberCost(calls=n, usd=usd(spent))
            for name, (n, spent) in member_spend(run).items()
        }
        platforms[run.name] = before.model_copy(
            update={"calls": calls, "usd": usd(dollars), "members": members}
        )
    total = usd(sum(p.usd for p in platforms.values()))
    return cost.model_copy(update={"platforms": platforms, "total_usd": total})


def hold(name: str, held: HeldCall) -> Mutator:
    """Count one call of `held.lease`'s before it is sent: the hold is added to the run's
    document while the run is running and leased to that worker; otherwise nothing is written
    (None), and the worker must not send the call (its run was cancelled, timed out, or taken
    over). Idempotent: a hold already there is not added twice."""

    def mutate(snap: Snapshot) -> Writes | None:
        run = snap.runs.get(name)
        if (
            run is None
            or snap.task.status.terminal
            or run.state is not PlatformState.RUNNING
            or run.lease != held.lease
        ):
            return None
        if any(h.id == held.id for h in run.held_calls):
            return Writes(runs=[run])
        return Writes(runs=[run.model_copy(update={"held_calls": [*run.held_calls, held]})])

    return mutate


def settled_holds(run: PlatformRun, calls: Sequence[CallRecord]) -> list[HeldCall]:
    """`run`'s holds that `calls` (records about to land on it) do not settle."""
    answered = {c.hold for c in calls if c.hold is not None}
    return [h for h in run.held_calls if h.id not in answered]


def settle_late(name: str, token: str, calls: Sequence[CallRecord], now: datetime) -> Mutator:
    """A worker whose outcome no longer lands (its run was ended by a cancel or the deadline,
    or taken over by another delivery) still settles the holds it left: its call records join
    the run's, the holds they answer are dropped, and, once the search is terminal, its
    receipt is summed again (the service adjusts the day by the difference). Writes nothing
    when none of the worker's holds is left (a free platform, or settled already: idempotent).
    """

    def mutate(snap: Snapshot) -> Writes | None:
        run = snap.runs.get(name)
        if run is None:
            return None
        mine = {h.id for h in run.held_calls if h.lease == token}
        if not mine & {c.hold for c in calls}:
            return None
        ended = run.model_copy(
            update={"calls": [*run.calls, *calls], "held_calls": settled_holds(run, calls)}
        )
        task = snap.task
        if not task.status.terminal:
            return Writes(runs=[ended])  # the finalization will sum it
        cost = receipt(task.cost, [ended])
        return Writes(task=task.model_copy(update={"cost": cost, "updated_at": now}), runs=[ended])

    return mutate
