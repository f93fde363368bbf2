"""A fallback chain's decisions (`google|brave`: wire/selection.py), as pure functions.

When the next member is asked
-----------------------------
A member passes its turn when it cannot answer for the provider's reasons, the ones another
provider may not share: a 429 after the runner's retries (quota or rate exhausted), a 401, 402,
403 or 407 (a key refused, a plan spent), a 5xx, a timeout or a dropped connection, a malformed
answer, an anti-bot page (the breaker's provider faults, breaker.py), its breaker open (it is not
asked), or it cannot run here (its settings). Per query too: a member that answers some queries
and fails others for those reasons passes those queries on (an empty answer where the provider
signals an error is such a failure: the adapters raise it). Not passed on: a query the provider
refused as asked (a 4xx: the caller's query), `not asked` (a cache-only miss, a spent share of a
per-search cap), fanfuse's own failure, a cancel, the search's deadline.

A hedge asks the next member while the one before still runs (`service/chains.py`: after
`hedge_after_s`); the first good answer is used, the others cancelled.

Whose results are whose is provenance.py's.
"""

from __future__ import annotations

from collections.abc import Sequence

from fanfuse.rules.breaker import PROVIDER_FAULTS, run_kind
from fanfuse.rules.lifecycle import Outcome
from fanfuse.wire.chain import MemberRun, MemberState
from fanfuse.wire.models import FailureKind, PlatformRun, PlatformState

SHORT = {
    FailureKind.RATE_LIMITED: "quota exhausted",
    FailureKind.DENIED: "access refused",
    FailureKind.CAPTCHA: "blocked by an anti-bot page",
    FailureKind.ERROR: "failed",
    FailureKind.QUERY: "refused the query",
    FailureKind.NOT_ASKED: "not asked",
    FailureKind.INTERNAL: "failed (internal error)",
}


def passes(kind: FailureKind | None) -> bool:
    """Whether a failure of this kind passes the turn to the next member."""
    return (kind or FailureKind.ERROR) in PROVIDER_FAULTS


def passed_queries(outcome: Outcome) -> list[int]:
    """The queries an answering member failed for reasons that pass them on."""
    return [f.query_index for f in outcome.failed_queries if passes(f.kind)]


def passes_turn(outcome: Outcome) -> bool:
    """Whether the next member is asked after this outcome (for all of it, or some queries)."""
    if outcome.state is PlatformState.FAILED:
        return passes(outcome.failure)
    if outcome.state is PlatformState.SUSPENDED:
        return True
    if outcome.state is PlatformState.SUCCEEDED:
        return bool(passed_queries(outcome))
    return False  # cancelled, or the search's deadline: nothing is left to ask for


def short_reason(outcome: Outcome) -> str:
    """A member's end as a progress message says it: `quota exhausted`, `suspended`..."""
    if outcome.state is PlatformState.SUSPENDED:
        return "suspended"
    if outcome.state is PlatformState.TIMED_OUT:
        return "timed out"
    if outcome.state is PlatformState.CANCELLED:
        return "cancelled"
    if outcome.state is PlatformState.SUCCEEDED:
        n = len(passed_queries(outcome))
        return f"{n} quer{'y' if n == 1 else 'ies'} failed"
    return SHORT[outcome.failure or FailureKind.ERROR]


def handover_message(member: str, outcome: Outcome, following: str) -> str:
    """`google: quota exhausted, brave answering`."""
    return f"{member}: {short_reason(outcome)}, {following} answering"


def hedge_message(member: str, after_s: float, following: str) -> str:
    """`google: no answer after 0.5 s, brave asked too`."""
    return f"{member}: no answer after {after_s:g} s, {following} asked too"


def skipped_message(member: str, reason: str, following: str | None) -> str:
    then = f", {following} answering" if following else ""
    return f"{member}: {reason}{then}"


def failure_of(ended: Sequence[MemberRun]) -> FailureKind:
    """A chain that ran out: its most serious member failure (breaker.run_kind)."""
    return run_kind([m.failure for m in ended if m.failure is not None])


def error_of(ended: Sequence[MemberRun]) -> str:
    """A chain that ran out: each member's reason, in order."""
    return "; ".join(f"{m.name}: {m.reason or m.state.value}" for m in ended)


def pending(run: PlatformRun, queries: int) -> list[int]:
    """The queries no member has answered yet: what the member whose turn it is is asked."""
    answered = {qi for m in run.members for qi in m.answered}
    return [qi for qi in range(queries) if qi not in answered]


def answered_state(ended: Sequence[MemberRun]) -> list[str]:
    """The members whose answers are used, in chain order (`PlatformRun.answered_by`)."""
    return [m.name for m in ended if m.state is MemberState.ANSWERED]
