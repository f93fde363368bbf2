"""A priced call counted before it is sent: the runner's hook for it, and what tells whether
the request of a call that got no answer left at all.

The spend ledger (rules/spend.py) holds each priced provider call on its run's document before
the runner sends it, and settles the hold with the call's record: its price when the provider
answered with a 2xx, 0 when it refused, and, when no answer came back (a timeout, a cancel, the
deadline cut it), its held price if the request may have reached the provider, which may bill
it, else 0. `Departure` tells the two apart from httpcore's trace events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

CallHold = Callable[[], tuple[str, float]]
"""Counts a priced call before it is sent (service/ledger.py: a hold on the run's document):
returns the hold's id and the price it counts the call at, or raises `Cancelled` to refuse the
call (its run is no longer this worker's), which is then not sent. The runner calls it once per
request, inside the platform's concurrency slot with nothing awaited between it and the send,
so a call held is a call sent unless the send itself fails."""


class Departure:
    """Whether a held call's request may have left, learnt from httpcore's trace events (the
    `trace` request extension): a call cut before its request headers started out (waiting for
    a connection, connecting) was never sent, so no provider can bill it. httpcore reports
    every request it writes (`tracing`: the runner's transport is httpx's own); a transport
    that reports nothing (a test's) tells nothing, and its calls count as sent."""

    def __init__(self, *, tracing: bool) -> None:
        self.tracing = tracing
        self.traced = self.sent = False

    async def trace(self, event: str, info: Mapping[str, object]) -> None:
        self.traced = True
        if event.endswith("send_request_headers.started"):
            self.sent = True

    @property
    def may_have_left(self) -> bool:
        return self.sent or not (self.tracing or self.traced)
