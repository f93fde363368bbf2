"""Keep a claimed platform run's lease alive while its worker works.

A lease (lifecycle.claim) is short, so a dead worker's run is taken over within one lease rather
than at the search deadline. A live worker therefore renews it: every third of the lease it
writes a new `lease_until` through `patch_run`, the same holder-only conditional write as a
progress update, so a renewal can never revive an ended run or steal a run another delivery took
over. A renewal that is refused means the run is no longer this worker's: `lost` is set, and the
worker stops instead of calling the provider for a result nobody will record.

A renewal that fails (a store that stalls or errs) is only logged: the lease still has two thirds
left, and the next renewal tries again. Renewals run in a thread, so a stalled store call never
blocks the worker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from types import TracebackType

from fanfuse.rules.lifecycle import progress_accepted
from fanfuse.store.ports import TaskDocuments

log = logging.getLogger(__name__)


class Heartbeat:
    """`async with Heartbeat(...)`: renew `token`'s lease on the run until the block ends."""

    def __init__(
        self,
        store: TaskDocuments,
        task_id: str,
        name: str,
        token: str,
        lease: timedelta,
        clock: Callable[[], datetime],
        *,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        """`on_lost`: called once the run is no longer this worker's (its calls in flight are
        cut then: a cancel in another process is learnt here)."""
        self.store, self.task_id, self.name, self.token = store, task_id, name, token
        self.lease, self.clock = lease, clock
        self.on_lost = on_lost
        self.lost = False
        self._beating: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Heartbeat:
        self._beating = asyncio.create_task(self._beat())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._beating is not None:
            self._beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beating

    async def _beat(self) -> None:
        period = self.lease.total_seconds() / 3
        while not self.lost:
            await asyncio.sleep(period)
            until = self.clock() + self.lease
            try:
                kept = await asyncio.to_thread(
                    self.store.patch_run,
                    self.task_id,
                    self.name,
                    {"lease_until": until.isoformat()},
                    lease=self.token,
                )
            except Exception as exc:  # a stalled or failing store: the lease has time left
                log.warning("lease renewal of %s failed: %r", self.name, exc)
                continue
            if not kept and not await asyncio.to_thread(self._still_held):
                log.info("lease of %s is no longer this worker's: stopping", self.name)
                self.lost = True
                if self.on_lost is not None:
                    self.on_lost()

    def _still_held(self) -> bool:
        """Whether the run is still this worker's after a renewal was refused: the cloud
        stores refuse a conditional write that merely raced another write of the run (its
        progress, a call's hold), which must not stop the worker; the next renewal retries."""
        try:
            runs = self.store.get_runs(self.task_id)
        except Exception:  # cannot tell: the lease has time left, the next renewal will
            return True
        run = next((r for r in runs if r.name == self.name), None)
        return run is not None and progress_accepted(run, self.token)
