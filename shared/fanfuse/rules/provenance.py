"""Whose results are whose in a search with fallback chains (rules/chain.py), as pure functions.

A chain run's results are labelled by the member that gave them (`Hit.metadata["answered_by"]`),
and fusion takes each member's results as that member's list (`lists`): the fused results'
`platform` and `platforms` name the platform that answered, not the run it answered for. A weight
given to the run applies to whichever member answered for it, unless that member has one of its
own (`weights`). The receipt splits a chain's spend by member from the call records, each of
which names the platform that made it (`member_spend`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fanfuse.wire.models import Hit, PlatformRun

ANSWERED_BY = "answered_by"
"""The hit metadata naming the chain member that gave it."""


def tagged(hits: Sequence[Hit], member: str) -> list[Hit]:
    """`hits` labelled as `member`'s (see the module)."""
    return [h.model_copy(update={"metadata": {**h.metadata, ANSWERED_BY: member}}) for h in hits]


def answerer(hit: Hit, run: PlatformRun) -> str:
    found = hit.metadata.get(ANSWERED_BY)
    return found if isinstance(found, str) and found else run.name


def lists(runs: Sequence[PlatformRun]) -> dict[str, list[Hit]]:
    """Each answering platform's hits, for fusion: a run's own, a chain's by member."""
    found: dict[str, list[Hit]] = {}
    for run in runs:
        if not run.chain:
            found.setdefault(run.name, []).extend(run.results)
            continue
        for hit in run.results:
            found.setdefault(answerer(hit, run), []).append(hit)
    return found


def weights(
    given: Mapping[str, float] | None, runs: Sequence[PlatformRun]
) -> dict[str, float] | None:
    """The request's weights, a run's carried to the members that answered for it."""
    if not given:
        return None
    out = dict(given)
    for run in runs:
        if run.name in given:
            for member in run.answered_by:
                out.setdefault(member, given[run.name])
    return out


def member_spend(run: PlatformRun) -> dict[str, tuple[int, float]]:
    """A chain run's charged calls and dollars per member, from its call records (each names
    the platform that made it); empty for a run without a chain."""
    if not run.chain:
        return {}
    spent: dict[str, tuple[int, float]] = {name: (0, 0.0) for name in run.chain}
    for call in run.calls:
        if call.cost_usd > 0:
            calls, usd = spent.get(call.platform, (0, 0.0))
            spent[call.platform] = (calls + 1, usd + call.cost_usd)
    return {name: figures for name, figures in spent.items() if figures[0]}
