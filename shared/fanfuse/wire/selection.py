"""The platform selection: what a request's `platform` may say, and the platform runs it means.

The syntax
----------
Entries are separated by commas (in one string, or in list items, each holding one or more):
`"docs, google|brave"`, `["docs", "google|brave"]`. An entry is a platform name, or a fallback
chain: names joined by `|`, asked in that order, each in its predecessor's place when that one
cannot answer (`rules/chain.py` says when). Names are read in any case with blanks around them
(`" Google | BRAVE "` is `google|brave`); `all` stands alone.

What an entry means
-------------------
Each entry is one platform run (a slot), named by its first member: `google|brave` is the run
`google`, its results labelled by whichever member gave them. A deployment may give a platform a
chain of its own (`Settings.chains`, `{"builtin": ["perplexity"]}` by default): a name entered
alone carries it, wherever it is selected (by name or by `all`); an entry that spells a chain
replaces the deployment's.

A platform is asked at most once per search: a name repeated is asked once, where it first
appears; a platform entered in its own right is dropped from every chain (it answers anyway);
a fallback is kept in the first chain that names it only; and a run that is left with no member
able to run here is dropped (`google|docs, docs` without a Google key is `docs`). `all` means
every platform a request may name alone here, each with the deployment's chain, minus the
fallbacks of those chains (a deployment chain is the deployment saying "ask brave only when
google cannot answer").

What is refused (a 400 naming the field): an empty name in a chain (`google|`), an unknown name,
a name entered alone that cannot run here (and has no deployment chain that can), a chain none
of whose members can run here, `all` with anything else. A chain member that cannot run here is
kept: the run skips it and says why (`PlatformRun.members`), as it does for one whose breaker is
open when its turn comes.

Everything here is pure and linear in the input: names are counted (`|` and `,` included)
before any is split off, against MAX_PLATFORM_NAMES, and each is at most MAX_NAME_CHARS long.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fanfuse.wire.fields import shown

MAX_PLATFORM_NAMES = 64
"""Platform names one request may list (chain members included), counted before duplicates are
dropped: more than any deployment has (about 20), and a bound on the work a body can ask of the
validator."""
MAX_NAME_CHARS = 40
"""A platform name's length at most: a longer one is refused before it is looked up or quoted
back in a 400."""
ALL = "all"
CHAIN = "|"


def members(entry: str) -> list[str]:
    """`"google|brave"` -> `["google", "brave"]` (an entry as `SearchRequest.platform` holds it)."""
    return entry.split(CHAIN)


def entry_of(names: Sequence[str]) -> str:
    return CHAIN.join(names)


def split_entries(value: Any) -> list[list[str]]:
    """`"docs, Google|brave"` or `["docs", "google | brave"]` -> `[["docs"], ["google", "brave"]]`
    (lower case, blanks dropped, empty entries dropped; an empty name inside a chain is an
    error, as is anything but strings)."""
    if isinstance(value, str):
        items: list[Any] = [value]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise ValueError("platform must be a string or a list of strings")
    if not all(isinstance(item, str) for item in items):
        raise ValueError("platform names must be strings")
    count = sum(item.count(",") + item.count(CHAIN) + 1 for item in items)
    if count > MAX_PLATFORM_NAMES:
        raise ValueError(f"at most {MAX_PLATFORM_NAMES} platform names per request, got {count}")
    entries: list[list[str]] = []
    for part in (part for item in items for part in item.split(",")):
        names = [name.strip().lower() for name in part.split(CHAIN)]
        for name in names:
            if len(name) > MAX_NAME_CHARS:
                raise ValueError(
                    f"platform name {shown(name)} is longer than {MAX_NAME_CHARS} characters"
                )
        if len(names) > 1 and not all(names):
            raise ValueError(
                f"fallback chain {shown(part.strip())} has an empty name: write names joined "
                "by |, as in google|brave"
            )
        if names[0]:
            entries.append(names)
    return entries


def split_platforms(value: Any) -> list[str]:
    """Every name the selection mentions, in order, once (chain members included)."""
    return list(dict.fromkeys(name for entry in split_entries(value) for name in entry))


@dataclass(frozen=True)
class Here:
    """What this deployment offers a selection (`Catalog` builds it; validation's context)."""

    alone: Sequence[str]
    """Names a request may enter alone: able to run here, or through their deployment chain
    (the order of `all`)."""
    unavailable: Mapping[str, str] = field(default_factory=dict)
    """Every known name that cannot run here itself, with why (a name entered alone through
    its deployment chain is one)."""
    runnable: Sequence[str] | None = None
    """Names that can run here themselves (None: the same as `alone`)."""
    chains: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """The deployment's chains: a platform -> its fallbacks, in order (known names only)."""
    max_platforms: int | None = None
    quickest: int | None = None
    """How many platforms `all` means at most (the mode's, the deployment's cap)."""
    by_latency: Callable[[list[str]], list[str]] | None = None
    """Names quickest first, for `all` cut to `quickest`."""

    @property
    def can_run(self) -> set[str]:
        return set(self.alone if self.runnable is None else self.runnable)

    @property
    def known(self) -> set[str]:
        return {*self.alone, *self.unavailable}


def resolve(entries: list[list[str]], here: Here | None) -> list[str]:
    """The validated selection as entries (`"google|brave"`), or ValueError saying what is wrong.
    Without `here` (a stored task read back), entries are only normalized."""
    if not entries:
        raise ValueError("platform selection is empty")
    if any(ALL in entry for entry in entries):
        if any(entry != [ALL] for entry in entries):  # `all, ALL` is all
            raise ValueError('"all" cannot be combined with other platform names')
        if here is None:
            return [ALL]
        return everything(here)
    if here is None:
        return [entry_of(chain) for chain in _asked_once(entries)]
    _check_known(entries, here)
    chained = [e if len(e) > 1 else [e[0], *here.chains.get(e[0], ())] for e in entries]
    can_run = here.can_run
    for entry, chain in zip(entries, chained, strict=True):
        if not any(name in can_run for name in chain):
            raise ValueError(_not_here(entry, chain, here))
    # A run left with no member that can run (its others are asked in their own right) is
    # dropped: those answer anyway, and it could only fail.
    runs = [run for run in _asked_once(chained) if any(name in can_run for name in run)]
    if here.max_platforms is not None and len(runs) > here.max_platforms:
        raise ValueError(
            f"at most {here.max_platforms} platforms per request on this deployment, "
            f"got {len(runs)}"
        )
    return [entry_of(chain) for chain in runs]


def _asked_once(entries: list[list[str]]) -> list[list[str]]:
    """Each platform asked once (see the module): entries whose first name repeats an earlier
    entry's first name are dropped, then chains lose the names entered in their own right and
    the fallbacks an earlier chain has."""
    firsts: dict[str, list[str]] = {}
    for entry in entries:
        firsts.setdefault(entry[0], entry)
    taken = set(firsts)
    runs: list[list[str]] = []
    for first, entry in firsts.items():
        chain = [first]
        for name in entry[1:]:
            if name not in taken:
                taken.add(name)
                chain.append(name)
        runs.append(chain)
    return runs


def _check_known(entries: list[list[str]], here: Here) -> None:
    known = here.known
    unknown = list(dict.fromkeys(n for entry in entries for n in entry if n not in known))
    if unknown:
        quoted = ", ".join(repr(n) for n in unknown)
        raise ValueError(f"unknown platform {quoted}; available: {', '.join(here.alone) or 'none'}")


def _not_here(entry: list[str], chain: list[str], here: Here) -> str:
    """Why an entry cannot run: its one name's reason, or each member's."""
    available = ", ".join(here.alone) or "none"
    if len(entry) == 1:
        name = entry[0]
        reasons = "; ".join(
            f"{'fallback ' if n != name else ''}{n!r}: {here.unavailable.get(n, 'not available')}"
            for n in chain
        )
        return f"platform not available here ({reasons}); available: {available}"
    reasons = "; ".join(f"{n!r}: {here.unavailable.get(n, 'not available')}" for n in chain)
    return (
        f"no member of the chain {entry_of(entry)!r} is available here ({reasons}); "
        f"available: {available}"
    )


def everything(here: Here) -> list[str]:
    """What `all` means: every name a request may enter alone, with its deployment chain, but
    the fallbacks of those chains (see the module); the quickest `quickest` of them when capped.
    """
    if not here.alone:
        raise ValueError("no platform is available (see `fanfuse platforms`)")
    alone = list(here.alone)
    fallbacks = {f for name in alone for f in here.chains.get(name, ())}
    firsts = [name for name in alone if name not in fallbacks]
    cap = here.quickest
    if cap is not None and cap < len(firsts):
        ordered = here.by_latency(firsts) if here.by_latency is not None else firsts
        chosen = set(ordered[:cap])
        firsts = [name for name in firsts if name in chosen]
    runs = _asked_once([[name, *here.chains.get(name, ())] for name in firsts])
    return [entry_of(chain) for chain in runs]
