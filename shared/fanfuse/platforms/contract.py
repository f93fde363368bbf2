"""The platform contract, in the manner of SearXNG's engines.

A platform declares its name, its settings (a pydantic-settings model: the platform is available
exactly when those settings validate) and its capabilities, and implements one async `search`.
HTTP platforms (see `http.py`) implement `search` through a pure request builder and a pure
response parser, leaving I/O, retries and limits to the shared runner in `fanfuse.net`.

The contract is generic in the settings type, so an adapter's code sees its own settings class,
typed, without casts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fanfuse.net.policy import PROVIDER, UNDOCUMENTED, RateLimit
from fanfuse.rules.limits import Budget
from fanfuse.wire.cost import Price
from fanfuse.wire.models import CacheNote, CallRecord, Hit, QueryFailure, utcnow
from fanfuse.wire.options import OptionName, OptionUse, SearchOptions

if TYPE_CHECKING:
    from fanfuse.net.guard import AddressPolicy, Resolver
    from fanfuse.net.holds import CallHold
    from fanfuse.net.runner import Runner
    from fanfuse.settings import Settings


class PlatformSettings(BaseModel):
    """Base of every platform's settings, read from `FANFUSE_<ENGINE>_<FIELD>` by the settings
    tree (`Settings.platform`): a plain model, not a settings root of its own.

    The env prefix is not declared per class: `Platform.load_settings` derives it from the
    engine's name, so an adapter's settings class holds only its fields.
    """

    model_config = ConfigDict(extra="ignore")

    timeout: float = PROVIDER.timeout
    """Seconds per provider call, body included."""
    max_concurrency: int = Field(default=PROVIDER.max_concurrency, ge=1)
    """Provider calls in flight per process; an adapter's default is `concurrency_for` its
    platform's `rate_limit` (see net/policy.py)."""
    cache_ttl: float | None = Field(
        default=None, ge=0, description="seconds; None: the deployment's cache TTL, 0: no cache"
    )
    pace: bool = Field(
        default=True,
        description="pace provider calls across the deployment's workers (service/pacing.py)",
    )
    pace_per_second: float | None = Field(
        default=None, gt=0, description="the pace, calls a second; None: the documented rate"
    )


S = TypeVar("S", bound=PlatformSettings)


class Capabilities(BaseModel):
    multi_query: bool = False
    content: bool = Field(default=False, description="hits carry page content already")
    resolves_urls: bool = Field(default=False, description="hit URLs may be redirects")


class SearchParams(BaseModel):
    """What the service asks of a platform for one run."""

    queries: list[str]
    limit: int
    language: str | None = None
    include_content: bool = False
    options: SearchOptions = Field(default_factory=SearchOptions)
    now: datetime = Field(
        default_factory=utcnow,
        description="when the search runs: what a time range counts back from, so request "
        "builders and the post-filter stay pure",
    )


ProgressFn = Callable[[int, int, str], None]
Pace = Callable[[], Awaitable[float]]


def _no_progress(current: int, total: int, message: str) -> None:
    return None


def _shared_runner() -> Runner:
    """The process's runner, imported on first use: a platform that makes no HTTP call (a
    local corpus) never loads httpx."""
    from fanfuse.net.runner import default_runner

    return default_runner()


@dataclass
class RunRecord:
    """What a platform run leaves besides its hits, for its platform document.

    Platforms and stages add to it as they go (the runner appends a `CallRecord` per outbound
    call); the service copies it into the run's outcome.
    """

    calls: list[CallRecord] = field(default_factory=list)
    provider: str | None = None
    """Who answered, when a platform can answer through another (builtin -> perplexity)."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds per stage."""
    options: dict[str, OptionUse] = field(default_factory=dict)
    """How each request option was applied (the searching stage's post-filter writes it)."""
    failed_queries: list[QueryFailure] = field(default_factory=list)
    cache: CacheNote | None = None
    provisional: bool = False
    """The answer stands in for the platform's own (vectors answering from BM25 while its index
    is built): shown as it is, never cached as the platform's answer."""


@dataclass
class PlatformContext(Generic[S]):
    """What a platform may use while it runs: its settings, the shared runner, the record, and
    the network guard's address policy and resolver for any URL it asks someone to fetch."""

    settings: S
    runner: Runner = field(default_factory=_shared_runner)
    record: RunRecord = field(default_factory=RunRecord)
    report: ProgressFn = _no_progress
    addresses: AddressPolicy | None = None
    """The deployment's address policy (its content settings); None: only global addresses."""
    resolver: Resolver | None = None
    """None: the system's resolver (tests give a double)."""
    call_budget: Budget | None = None
    """This run's share of the search's provider calls (limits.py); None: not capped."""
    price: Price = field(default_factory=Price)
    """What this run's provider charges (pricing.py): the call records carry it."""
    cost_budget: Budget | None = None
    """This run's share of the search's money, in the calls it affords (pricing.py, limits.py);
    None: no budget, or a free platform."""
    pace: Pace | None = None
    """Waits for this provider's pace across the deployment's workers before each attempt
    (service/pacing.py), returning the seconds it waited; None: not paced."""
    hold: CallHold | None = None
    """Counts each priced call before it is sent (net.holds.CallHold, rules/spend.py); None:
    a free platform, or a run outside a search."""


class Platform(ABC, Generic[S]):
    """One search platform. `name` and settings can be overridden per instance, so one engine
    can serve several named platforms (two SearXNG instances, say), as in SearXNG's settings."""

    name: str
    description: ClassVar[str] = ""
    settings_model: type[S]
    capabilities: ClassVar[Capabilities] = Capabilities()
    native: ClassVar[frozenset[OptionName]] = frozenset()
    """The request options this platform's provider applies itself (see `native_options`)."""
    list_price: ClassVar[Price] = Price()
    """The provider's public list price (dated, with its source, in docs/platforms.md); free
    and offline platforms keep 0. A deployment overrides it (`Settings.prices`)."""
    rate_limit: ClassVar[RateLimit | None] = UNDOCUMENTED
    """The provider's documented limit that its settings' `max_concurrency` default derives from
    (`concurrency_for`); None: a local platform that calls no provider."""
    typical_latency_s: ClassVar[float] = 1.5
    """Seconds a search usually takes, until this deployment has measured it (health.py): a
    web search API answers in about a second; LLM-backed and scraping platforms override it."""

    def __init__(
        self,
        name: str | None = None,
        overrides: dict[str, Any] | None = None,
        root: Settings | None = None,
    ) -> None:
        """`root`: the settings tree this platform's settings are read through (its
        registry's); None: the process's (`get_settings`)."""
        if name is not None:
            self.name = name
        self.overrides = dict(overrides or {})
        self.root = root
        self._settings: S | None = None

    @property
    def env_prefix(self) -> str:
        """`FANFUSE_<ENGINE>_`: every instance of an engine reads the engine's variables (a
        named instance gets what differs through its `overrides`); a class with no name of its
        own (made per instance) reads the instance's."""
        engine: str = getattr(type(self), "name", self.name)
        return f"FANFUSE_{engine.upper()}_"

    def load_settings(self) -> S:
        """Read this platform's settings through the settings tree now: the one place a
        platform's settings are made (`settings` keeps what it reads)."""
        from fanfuse.settings import get_settings

        root = self.root if self.root is not None else get_settings()
        return root.platform(self.settings_model, self.env_prefix, self.overrides)

    @property
    def cache_root(self) -> Path:
        """Where this platform keeps what it caches on disk (a local corpus's indexes, a
        published corpus's download): the settings tree's `cache_dir`."""
        from fanfuse.settings import get_settings

        return (self.root if self.root is not None else get_settings()).cache_dir

    def settings(self) -> S:
        """This instance's settings, read on first use and kept: an instance belongs to one
        runtime's registry (built at its composition root), so its environment is read once per
        runtime, not once per run, and a worker reads only its own platform's. Invalid settings
        are not kept: the platform stays unavailable, and asking again reads again."""
        if self._settings is None:
            self._settings = self.load_settings()
        return self._settings

    def availability(self) -> str | None:
        """None when the platform can run here, else why not (shown by `fanfuse platforms`)."""
        try:
            self.settings()
        except ValidationError as exc:
            missing = sorted(
                self.settings_env_name(str(err["loc"][0])) for err in exc.errors() if err["loc"]
            )
            return f"missing or invalid settings: {', '.join(missing)}"
        return None

    def settings_env_name(self, field_name: str) -> str:
        return f"{self.env_prefix}{field_name}".upper()

    def native_options(self, options: SearchOptions, settings: S) -> frozenset[OptionName]:
        """Which of the request's options the request builder maps to the provider's own
        parameters. The others are post-filtered where they can be (domains, dates) and recorded
        as not applied otherwise. Override when it depends on the values: Google takes one
        `siteSearch` domain, so two included domains are not native there."""
        return options.given() & self.native

    def price(self, settings: S | None) -> Price:
        """The list price for a run on `settings` (a deeper search tier may cost more); None:
        this process cannot read them (a start_search without provider keys), the default's."""
        return self.list_price

    def planned_calls(self, queries: int, depth: int, settings: S | None) -> tuple[int, int]:
        """How many provider requests a run for `queries` queries at `depth` results makes at
        most, and how many results each returns at most (pricing.py prices the plan): one
        request per query unless the platform says otherwise (paging, several queries a call)."""
        return queries, depth

    def pace_per_second(self, settings: S | None) -> float | None:
        """Provider calls a second this deployment allows itself across all its workers
        (service/pacing.py): `pace_per_second` from the settings, else the documented rate
        (`rate_limit`); None: not paced (a local platform, a service the deployment runs, an
        undocumented rate, or `pace` off). `settings` None: this process cannot read them."""
        if settings is not None and not settings.pace:
            return None
        if settings is not None and settings.pace_per_second is not None:
            return settings.pace_per_second
        limit = self.rate_limit
        return None if limit is None or limit.self_hosted else limit.per_second

    def resolve_target(self, url: str, body: bytes) -> str | None:
        """The real target of a redirect page this platform's results link to, when its page
        assembles it in a script (see weixin); None: follow HTTP and meta redirects only."""
        return None

    @abstractmethod
    async def search(self, ctx: PlatformContext[S], params: SearchParams) -> list[list[Hit]]:
        """Return one ranked list of hits per query, in query order."""
