"""The fan-in, and the last one finalizing in the same transaction.

A platform's fan-in (`lifecycle.finish`, or a chain's last turn's, with its timeline entry) counts
it on the task. On the cloud runtimes the last one to land also finalizes the search, where nothing
slow is left to do (`lifecycle.finalized_at_fan_in`: no reranker to call): before, that was a second
transaction on the task document right after the first (a begin, two reads and a commit more, on
Firestore), between the slowest platform's answer and the final one. Here it is one: the fan-in
finds, in what it read, that it is the last, asks the store for every run (`NeedsAllRuns`: a fan-in
that is not the last never reads the others', and never holds them), and writes the final document
with its own run's end. `lifecycle.finalize` decides as it always does (only from a non-terminal
status), so the deadline task, a redelivery or an aggregate delivery still find the search finalized
once.
"""

from __future__ import annotations

from datetime import datetime

from fanfuse.rules import lifecycle, timeline
from fanfuse.rules.mutations import Mutator, NeedsAllRuns, Snapshot, Writes


def fan_in(
    name: str,
    counted: Mutator,
    now: datetime,
    queued_at: datetime | None,
    working_at: datetime | None,
    *,
    finalize: bool,
) -> Mutator:
    """Platform `name`'s fan-in `counted` (`lifecycle.finish`, or a fallback chain's last turn:
    `handover.finish`) with its timeline entry (`timeline.at_fan_in`); when `finalize` and it
    is the last, the finalization too (see the module)."""
    finish = timeline.at_fan_in(counted, name, queued_at, working_at)

    def mutate(snap: Snapshot) -> Writes | None:
        writes = finish(snap)
        task = writes.task if writes is not None else None
        if writes is None or task is None or not finalize:
            return writes
        if task.counters.done < len(task.platforms) or not lifecycle.finalized_at_fan_in(task):
            return writes
        if any(p not in snap.runs for p in task.platforms):
            raise NeedsAllRuns()  # the store reads the others and runs this again
        ended = {**snap.runs, **{r.name: r for r in writes.runs}}
        final = timeline.finalize(now, force=False, by="fan_in")(Snapshot(task=task, runs=ended))
        if final is None or final.task is None:
            return writes
        runs = {r.name: r for r in writes.runs} | {r.name: r for r in final.runs}
        contents = {**writes.contents, **final.contents}
        return Writes(task=final.task, runs=list(runs.values()), contents=contents)

    return mutate
