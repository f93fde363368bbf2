"""The spend ledger's service side: a platform run's priced calls counted before they are sent,
a late worker's calls settled into the receipt and the day, and a cancel that cuts the calls in
flight of this process.

The rules are pure (rules/spend.py: the hold, the receipt, the late settlement); this is where
they meet the store, the runner (`net.holds.CallHold`) and the daily budget (budgets.py).

Why a hold per call and not only the start's reservation: the start reserves the plan's estimate
from the key's day, but what settles that reservation is the receipt, summed from the platform
documents when the search ends (cancelled, finalized). A call in flight at that moment was only
in its worker's memory, so a cancel or the deadline released its money while the provider still
billed it, and the late answer was dropped with the calls it carried (issue 29: six start-cancel
cycles, six paid calls, $0.00 recorded). A hold puts the call on the document before it leaves.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime

from fanfuse.rules import spend
from fanfuse.rules.mutations import Snapshot, Writes
from fanfuse.service.budgets import Budgets
from fanfuse.store.ports import TaskDocuments
from fanfuse.wire.errors import Cancelled
from fanfuse.wire.models import CallRecord, HeldCall, Task

log = logging.getLogger(__name__)


class RunHold:
    """One platform run's `CallHold`: each priced call of the worker holding lease `token` is
    put on the run's document (`spend.hold`) at `usd`, the dearest one call of this run can
    cost, before the runner sends it; refused (`Cancelled`, the call is not sent) once the run
    is no longer the worker's. One store transaction per priced call: free platforms hold none.
    """

    def __init__(
        self,
        store: TaskDocuments,
        task_id: str,
        name: str,
        token: str,
        usd: float,
        clock: Callable[[], datetime],
    ) -> None:
        self.store, self.task_id, self.name, self.token = store, task_id, name, token
        self.usd, self.clock = usd, clock

    def __call__(self) -> tuple[str, float]:
        held = HeldCall(id=uuid.uuid4().hex, usd=self.usd, lease=self.token, at=self.clock())
        if self.store.transact(self.task_id, [self.name], spend.hold(self.name, held)) is None:
            raise Cancelled(f"{self.name}: the run was ended or taken over; the call was not sent")
        return held.id, held.usd


def settle_late(
    store: TaskDocuments,
    budgets: Budgets,
    task_id: str,
    name: str,
    token: str,
    calls: Sequence[CallRecord],
    now: datetime,
) -> None:
    """A worker's outcome that did not land (its run was ended, or taken over) still settles
    the holds it left: its records join the run's document, and a terminal search's receipt
    and its key's day follow by the difference. A failure is logged: the holds stay counted,
    at their price, which errs on the safe side."""
    if not any(c.hold for c in calls):
        return
    totals: list[tuple[Task, Task]] = []
    mutate = spend.settle_late(name, token, calls, now)

    def seen(snap: Snapshot) -> Writes | None:
        written = mutate(snap)
        totals.append((snap.task, written.task if written and written.task else snap.task))
        return written

    try:
        store.transact(task_id, [name], seen)
    except Exception:
        log.warning("could not settle the late calls of %s/%s", task_id, name, exc_info=True)
        return
    before, after = totals[-1]
    if after.status.terminal:
        budgets.adjust(after, after.cost.total_usd - before.cost.total_usd)


class InFlight:
    """The platform runs this process is working on, by search, so that a cancel here cuts
    their calls in flight at once (a worker elsewhere learns of it from its lease renewal,
    service/heartbeat.py, or from its next hold, which is refused). Safe from any thread: a
    cancel may come from a front's worker thread while the runs are on the event loop."""

    def __init__(self) -> None:
        self._runs: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def enter(self, task_id: str) -> asyncio.Event:
        """The event that cuts this run (set by `abort`), until `leave`."""
        event = asyncio.Event()
        self._runs.setdefault(task_id, []).append((asyncio.get_running_loop(), event))
        return event

    def leave(self, task_id: str, event: asyncio.Event) -> None:
        runs = [r for r in self._runs.get(task_id, []) if r[1] is not event]
        if runs:
            self._runs[task_id] = runs
        else:
            self._runs.pop(task_id, None)

    def abort(self, task_id: str) -> None:
        for loop, event in list(self._runs.get(task_id, [])):
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # its loop is closed: nothing of it runs any more
                continue
