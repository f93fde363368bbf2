"""The request: what an app sends, validated into one clear problem per bad field.

`SearchRequest` is validated with a context that says which platforms are available here (and
why the others are not), the deployment's fallback chains, its deadline and limits
(`max_queries`, `max_platforms`), and `by_latency` (the available platforms quickest first, for a
mode whose `all` means the quickest, and for a deployment that caps how many platforms `all` may
mean), so the same model gives the same 400 in every runtime and in `fanfuse search`. What
`platform` may say (names, `google|brave` chains, `all`) is selection.py's.
"""

from __future__ import annotations

import re
import unicodedata
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from fanfuse.wire import selection
from fanfuse.wire.chain import HedgeAfter
from fanfuse.wire.fields import Domains, country_code, one_or_list, shown
from fanfuse.wire.inbound import Inbound, character_problem
from fanfuse.wire.modes import DEFAULT_MODE, MODES, Mode
from fanfuse.wire.options import (
    CacheMode,
    SafeSearch,
    SearchOptions,
    TimeRange,
)
from fanfuse.wire.selection import MAX_NAME_CHARS as MAX_NAME_CHARS
from fanfuse.wire.selection import MAX_PLATFORM_NAMES as MAX_PLATFORM_NAMES
from fanfuse.wire.selection import split_platforms as split_platforms

MAX_QUERIES = 5
MIN_TIMEOUT_S = 0.5
MAX_QUERY_CHARS = 500
MAX_COST_USD = 1000.0
"""The largest per-request cap a request may set: far over any one search's cost (the dearest
plan is a few dollars), so a larger figure is a typo, not a budget."""


class FusionMethod(StrEnum):
    """How per-platform ranked lists become one list (see fusion.py and fusers.py)."""

    RRF = "rrf"
    SCORE = "score"
    CONCAT = "concat"


_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def text_problem(text: str) -> str | None:
    """Why `text` is not a query a person could have typed, or None: a character no person
    means (inbound.py: a control, a bidi control, a zero-width character), or no visible
    character at all (only spaces, format characters, or marks)."""
    problem = character_problem(text)
    if problem:
        return problem
    if not any(unicodedata.category(char)[0] in "LNPS" for char in text):
        return "has no visible character"
    return None


def _weights_shape(value: Any) -> Any:
    """At most MAX_PLATFORM_NAMES weights, each keyed by a name of at most MAX_NAME_CHARS:
    checked before pydantic validates each value, so a body of 10,000 weights costs a count."""
    if isinstance(value, dict):
        if len(value) > MAX_PLATFORM_NAMES:
            raise ValueError(f"at most {MAX_PLATFORM_NAMES} weights, got {len(value)}")
        for key in value:
            if isinstance(key, str) and len(key.strip()) > MAX_NAME_CHARS:
                raise ValueError(
                    f"weight for {shown(key.strip())}: a platform name is at most "
                    f"{MAX_NAME_CHARS} characters"
                )
    return value


def _integral(value: Any) -> Any:
    """`10.0` as 10: JSON has one number type, and JSON Schema's `integer` is any number
    without a fraction (a JavaScript client cannot even tell 10.0 from 10). Still strict about
    the rest: `true`, `"10"` and `10.5` are refused."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class SearchRequest(Inbound):
    """What an app sends. Validate with `context={"available": [...]}` to check platform names.

    No string in it, key or value, may hold a control character, a bidi control or a
    zero-width character: it is an `Inbound` model (inbound.py). Its numbers and booleans are
    strict: `true` is not 1, `1` is not true, `"10"` is not ten (JSON has types, and a client
    sending the wrong one has a bug a 400 shows; pydantic's lax mode would hide it); `10.0`
    is ten, as JSON Schema's `integer` says (`_integral`). Every
    list and map has a bound, checked before its items are: validating a body is linear in
    it, and a 64 KiB body is refused in about a millisecond."""

    model_config = ConfigDict(str_strip_whitespace=False)

    query: list[str] = Field(
        description="one query, or a list of 1-5 queries",
        json_schema_extra=one_or_list(MAX_QUERIES, minLength=1, maxLength=MAX_QUERY_CHARS),
    )
    mode: Mode = Field(
        default=DEFAULT_MODE,
        description="fast | balanced | comprehensive: which platforms `all` means, how deep "
        "each platform searches, whether content is fetched and results reranked (modes.py)",
    )
    platform: list[str] = Field(
        default="all",  # type: ignore[assignment]
        validate_default=True,
        description='"all", one name, comma-separated names, or a list; a fallback chain is '
        'names joined by "|" ("google|brave": google, else brave in its place); resolved to '
        f"one entry a platform run (at most {MAX_PLATFORM_NAMES} names, each at most "
        f"{MAX_NAME_CHARS} characters)",
        json_schema_extra=one_or_list(MAX_PLATFORM_NAMES),
    )
    max_results: Annotated[int, Field(strict=True, ge=1, le=100), BeforeValidator(_integral)] = (
        Field(
            default=10, description="results in all after fusion (per query when there are several)"
        )
    )
    include_content: Annotated[bool, Field(strict=True)] = Field(
        default=False,
        description="fetch each result's page content; when not given, the mode decides "
        "(fast: no, balanced: no, comprehensive: yes)",
    )
    fusion: FusionMethod | None = Field(
        default=None, description="fuser; None means the default fuser (fusers.DEFAULT_FUSION)"
    )
    language: Annotated[str, Field(pattern=r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})?$")] | None = None
    weights: Annotated[
        dict[str, Annotated[float, Field(strict=True, ge=0, le=100)]] | None,
        BeforeValidator(_weights_shape),
    ] = Field(default=None, json_schema_extra={"maxProperties": MAX_PLATFORM_NAMES})
    include_domains: Domains = Field(
        default_factory=list, description="host names; a domain also matches its subdomains"
    )
    exclude_domains: Domains = Field(default_factory=list)
    time_range: TimeRange | None = None
    country: Annotated[str, AfterValidator(country_code)] | None = Field(
        default=None, description="ISO 3166-1 alpha-2"
    )
    safesearch: SafeSearch | None = None
    timeout_s: Annotated[float, Field(strict=True)] | None = Field(
        default=None,
        description="the search's time budget in seconds, from 0.5 up to the deployment's "
        "deadline; when it runs out the search is finalized with what has arrived",
        json_schema_extra={"minimum": MIN_TIMEOUT_S},
    )
    cache: CacheMode = CacheMode.AUTO
    max_cost_usd: Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)] | None = Field(
        default=None,
        description="the most this search may cost in provider calls, in USD (each platform's "
        "price list: docs/platforms.md); over it the search is refused before any call, or "
        "trimmed (`budget`). None: the deployment's default cap, if any",
        json_schema_extra={"maximum": MAX_COST_USD},
    )
    budget: Literal["refuse", "trim"] = Field(
        default="refuse",
        description="when the estimate is over the cap: refuse (a 400 with the estimate and "
        "how to fit), or trim (drop the dearest platforms first until it fits)",
    )
    hedge_after_s: HedgeAfter | None = Field(
        default=None,
        description="a fallback chain asks its next member too when the one asked has not "
        "answered after this many seconds (the first good answer is used, the other "
        'cancelled); "p90": after that member\'s recent p90 latency; "off": only on a '
        "failure. None: the deployment's chain setting, else p90",
    )

    @field_validator("max_cost_usd")
    @classmethod
    def _cost(cls, value: float | None) -> float | None:
        if value is not None and value > MAX_COST_USD:
            raise ValueError(f"must be at most {MAX_COST_USD:g} USD")
        return value

    @field_validator("query", mode="before")
    @classmethod
    def _queries(cls, value: Any, info: ValidationInfo) -> list[str]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise ValueError("query must be a string or a list of strings")
        if not value:
            raise ValueError("query must not be empty")
        most = min(MAX_QUERIES, (info.context or {}).get("max_queries") or MAX_QUERIES)
        if len(value) > most:
            raise ValueError(f"at most {most} queries per request, got {len(value)}")
        queries: list[str] = []
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise ValueError(f"query {i + 1} must be a string")
            text = item.strip()
            if not text:
                raise ValueError(f"query {i + 1} is empty")
            if len(text) > MAX_QUERY_CHARS:  # first: the scans below then read 500 at most
                raise ValueError(
                    f"query {i + 1} has {len(text)} characters; at most {MAX_QUERY_CHARS}"
                )
            problem = text_problem(text)
            if problem:
                raise ValueError(f"query {i + 1} {problem}")
            queries.append(text)
        return queries

    @field_validator("platform", mode="before")
    @classmethod
    def _platforms(cls, value: Any, info: ValidationInfo) -> list[str]:
        return selection.resolve(selection.split_entries(value), _here(info))

    @field_validator("weights")
    @classmethod
    def _weights(
        cls, value: dict[str, float] | None, info: ValidationInfo
    ) -> dict[str, float] | None:
        """Each weight names a platform available here (a typo is a 400); one for a platform
        the search does not run is unused. Not "one of the selection": the default selection,
        `all`, is chosen by the server (the mode's quickest, `max_platforms`, by measured
        latency), so a client could not know which weights a 400 would refuse, and a body
        valid one minute would be refused the next."""
        if value is None:
            return None
        lowered = {k.strip().lower(): v for k, v in value.items()}
        available = _available(info)
        if available is not None:
            unknown = sorted(set(lowered) - set(available))
            if unknown:
                raise ValueError(
                    f"weights name platforms not available here: {', '.join(map(repr, unknown))}"
                    f"; available: {', '.join(available) or 'none'}"
                )
        return lowered

    @field_validator("exclude_domains")
    @classmethod
    def _disjoint(cls, value: list[str], info: ValidationInfo) -> list[str]:
        both = sorted(set(value) & set(info.data.get("include_domains") or []))
        if both:
            raise ValueError(f"{', '.join(both)} both included and excluded")
        return value

    @field_validator("hedge_after_s")
    @classmethod
    def _hedge(cls, value: float | str | None, info: ValidationInfo) -> float | str | None:
        deadline = (info.context or {}).get("deadline_seconds")
        if isinstance(value, float | int) and deadline is not None and value > deadline:
            raise ValueError(f"must be at most the deployment's deadline, {deadline:g} seconds")
        return value

    @field_validator("timeout_s")
    @classmethod
    def _timeout(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is None:
            return None
        if not value >= MIN_TIMEOUT_S:  # also refuses NaN
            raise ValueError(f"must be at least {MIN_TIMEOUT_S} seconds")
        deadline = (info.context or {}).get("deadline_seconds")
        if deadline is not None and value > deadline:
            raise ValueError(f"must be at most the deployment's deadline, {deadline:g} seconds")
        return value

    @model_validator(mode="after")
    def _resolved(self) -> SearchRequest:
        for name in (n for entry in self.platform for n in selection.members(entry)):
            if name != selection.ALL and not _NAME.match(name):
                raise ValueError(f"platform name {name!r} is not a valid name")
        content = MODES[self.mode].content
        if "include_content" not in self.model_fields_set and content is not None:
            self.include_content = content
        return self

    @property
    def depth(self) -> int:
        """How many results each platform is asked for: the mode's candidate pool."""
        return MODES[self.mode].depth(self.max_results)

    @property
    def reranks(self) -> bool:
        return MODES[self.mode].rerank

    @property
    def options(self) -> SearchOptions:
        return SearchOptions(
            include_domains=self.include_domains,
            exclude_domains=self.exclude_domains,
            time_range=self.time_range,
            country=self.country,
            safesearch=self.safesearch,
        )

    @property
    def queries(self) -> list[str]:
        return self.query

    @property
    def platforms(self) -> list[str]:
        """The platform runs' names: each entry's first member."""
        return [selection.members(entry)[0] for entry in self.platform]

    @property
    def chains(self) -> dict[str, list[str]]:
        """Each run with fallbacks -> its members in order, its own name first."""
        found = (selection.members(entry) for entry in self.platform)
        return {names[0]: names for names in found if len(names) > 1}


def _here(info: ValidationInfo) -> selection.Here | None:
    """What this deployment offers a selection, from the validation's context (None: no
    context, a stored task read back: entries are only normalized).

    `available`: the names a request may enter alone; `unavailable`: the others, with why;
    `runnable`: the names that can run here themselves (default: `available`); `chains`: the
    deployment's fallback chains. `all` means the quickest N of the available platforms by
    `by_latency` when the mode (`fast`) or the deployment (`max_platforms`) caps it: a 400
    would make `all`, the default, unusable there, while naming more is a 400.
    """
    ctx = info.context or {}
    available = ctx.get("available")
    if available is None:
        return None
    caps = (MODES[info.data.get("mode", DEFAULT_MODE)].quickest, ctx.get("max_platforms"))
    return selection.Here(
        alone=list(available),
        unavailable=ctx.get("unavailable", {}),
        runnable=ctx.get("runnable"),
        chains=ctx.get("chains", {}),
        max_platforms=ctx.get("max_platforms"),
        quickest=min((c for c in caps if c is not None), default=None),
        by_latency=ctx.get("by_latency"),
    )


def _available(info: ValidationInfo) -> list[str] | None:
    ctx = info.context or {}
    available = ctx.get("available")
    return list(available) if available is not None else None
