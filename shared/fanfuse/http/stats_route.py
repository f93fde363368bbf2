"""`GET /stats` as both fronts answer it, and `fanfuse stats`: who reads whose figures, the
query's parameters, and the read itself (the store's `recent`, then rules/stats_figures.py).

Who may read what (docs/security.md, "Stats"). The figures are aggregates (counts, seconds,
dollars, breaker states), never a query, a result or an owner; what differs between callers is
whose searches are counted:

- an operator (a caller whose subject is in `Settings.operators`; on `fanfuse serve`, the one key
  it prints too, by its key id: not any key of that key's owner, which `fanfuse keys create
  --owner local` could make) reads every owner's, or one owner's with `?owner=`;
- any other verified caller reads its own searches' figures (`scope: "owner"`); naming another
  owner is 403: how much someone else searches, and on which paid platforms, is theirs;
- an anonymous caller (a deployment with `auth_required` off) is 401: its searches have no
  owner to scope by, and the deployment's figures are the operators'.

The platforms' breaker states are in every answer: `GET /platforms` shows them to any caller.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from fanfuse.rules import stats_figures
from fanfuse.store.ports import HealthStore, StatsStore
from fanfuse.wire.errors import Forbidden, InvalidRequest, Unauthorized
from fanfuse.wire.models import Caller, Problem
from fanfuse.wire.stats_report import DEFAULT_WINDOW_S, MAX_SEARCHES, MAX_WINDOW_S, Stats

WINDOW = re.compile(r"^0*([1-9][0-9]{0,8})([smhd]?)$")
MAX_PARAMETER_CHARS = 200
"""The longest query parameter the document allows (`maxLength`): no caller subject is longer."""
UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
PARAMETERS = ("window", "owner")
ALL, OWNER = "all", "owner"


def parse_window(text: str | None, field: str = "window") -> timedelta:
    """`90`, `90s`, `30m`, `24h`, `7d` (None: the default day); a 400 naming `field` else.

    A longer window reads the longest one kept (30 days), as the answer's `window_s` says: the
    store never holds more, so refusing `365d` would only make a client guess the limit. The
    spelling is exactly `WINDOW_PATTERN`, which the OpenAPI document states, so what the document
    allows is answered and what it refuses is refused.
    """
    if text is None:
        return timedelta(seconds=DEFAULT_WINDOW_S)
    match = WINDOW.match(text)
    if not match:
        problem = "a whole duration such as 30m, 24h or 7d (seconds without a unit); up to 30d"
        raise InvalidRequest([Problem(field=field, problem=problem)])
    seconds = float(match.group(1)) * UNIT_S[match.group(2)]
    return timedelta(seconds=min(seconds, MAX_WINDOW_S))


@dataclass(frozen=True)
class StatsQuery:
    window: timedelta
    owner: str | None
    """Whose searches are counted; None: everyone's (an operator's question)."""


def is_operator(caller: Caller, operators: Sequence[str], operator_keys: Collection[str]) -> bool:
    """Whether `caller` reads the deployment's figures: its subject is listed, or it holds one
    of the keys named by id (`fanfuse serve`'s printed key). A key is named by its id, never by
    its owner: anyone who may create keys may create one for any owner."""
    return caller.subject in operators or (
        caller.key_id is not None and caller.key_id in operator_keys
    )


def query_for(
    caller: Caller | None,
    params: Mapping[str, str],
    operators: Sequence[str],
    operator_keys: Collection[str] = (),
) -> StatsQuery:
    """The question `caller` may ask with these parameters (see the module's docstring)."""
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise InvalidRequest(
            [Problem(field=name, problem="unknown parameter (window, owner)") for name in unknown]
        )
    window = parse_window(params.get("window"))
    asked = params.get("owner") or None
    if asked is not None and len(asked) > MAX_PARAMETER_CHARS:
        problem = f"at most {MAX_PARAMETER_CHARS} characters (a caller subject: key:<owner>, ...)"
        raise InvalidRequest([Problem(field="owner", problem=problem)])
    if caller is None:
        raise Unauthorized("stats need a credential: an operator's, or a caller's own")
    if is_operator(caller, operators, operator_keys):
        return StatsQuery(window, asked)
    if asked is not None and asked != caller.subject:
        raise Forbidden("only an operator reads another owner's stats (Settings.operators)")
    return StatsQuery(window, caller.subject)


def require_operator(
    caller: Caller | None, operators: Sequence[str], operator_keys: Collection[str] = ()
) -> Caller:
    """The deployment-wide figures (`GET /metrics`) are the operators': 401 with no
    credential, 403 for any other caller."""
    if caller is None:
        raise Unauthorized("metrics need an operator's credential")
    if not is_operator(caller, operators, operator_keys):
        raise Forbidden("only an operator reads the metrics (Settings.operators)")
    return caller


def collect(
    reads: StatsStore,
    health: HealthStore,
    query: StatsQuery,
    now: datetime,
    *,
    limit: int = MAX_SEARCHES,
) -> Stats:
    """The figures of `query`'s window: the store's recent searches, then the pure rules."""
    recorded, more = reads.recent(now - query.window, owner=query.owner, limit=limit)
    return stats_figures.compute(
        recorded,
        health.get_health(),
        now=now,
        window=query.window,
        scope=ALL if query.owner is None else OWNER,
        truncated=more,
    )
