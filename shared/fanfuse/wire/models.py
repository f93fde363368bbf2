"""Wire formats: the request, the task and platform documents, results.

These pydantic models are the only shapes that cross a boundary (HTTP, Firestore, SQLite, Cloud
Tasks bodies), so both runtimes store and return exactly the same documents.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fanfuse.support.redact import redact
from fanfuse.wire.chain import MemberRun
from fanfuse.wire.cost import Cost as Cost
from fanfuse.wire.cost import HeldCall as HeldCall
from fanfuse.wire.health import BreakerState as BreakerState
from fanfuse.wire.health import FailureKind as FailureKind
from fanfuse.wire.health import PlatformHealth as PlatformHealth
from fanfuse.wire.health import QuotaBucket as QuotaBucket
from fanfuse.wire.identity import ApiKey as ApiKey
from fanfuse.wire.identity import Caller as Caller
from fanfuse.wire.options import CacheMode, OptionUse
from fanfuse.wire.request import FusionMethod as FusionMethod
from fanfuse.wire.request import SearchRequest as SearchRequest
from fanfuse.wire.timeline import Timeline


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(when: datetime) -> datetime:
    """A naive datetime read as UTC, so naive and aware dates compare (providers send both)."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


class TaskStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    PARTIAL = "partial"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_TASK


TERMINAL_TASK = frozenset(
    {TaskStatus.COMPLETED, TaskStatus.PARTIAL, TaskStatus.FAILED, TaskStatus.CANCELLED}
)


class PlatformState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    SUSPENDED = "suspended"
    """Not called: the platform's circuit breaker is open (breaker.py); see `error`, `retry_at`."""

    @property
    def terminal(self) -> bool:
        return self not in (PlatformState.QUEUED, PlatformState.RUNNING)


class Stage(StrEnum):
    """A platform run's stages, in order; a run skips the ones it has no work for."""

    SEARCHING = "searching"
    RESOLVING = "resolving"
    FETCHING_CONTENT = "fetching_content"
    COMPRESSING = "compressing"


class Hit(BaseModel):
    """One result as a platform returns it, before fusion."""

    title: str = ""
    url: str
    snippet: str = ""
    content: str | None = None
    content_id: str | None = Field(
        default=None, description="set when the content was moved to the contents collection"
    )
    score: float | None = Field(default=None, description="the platform's own score, if any")
    published_at: datetime | None = None
    language: str | None = None
    query_index: int = 0
    rank: int = Field(default=0, description="1-based rank within its query's list")
    retrieved_at: datetime = Field(default_factory=utcnow)
    metadata: dict[str, Any] = Field(default_factory=dict)


class UrlVariant(BaseModel):
    """One URL under which the platforms gave a fused result, as they gave it."""

    url: str
    platforms: list[str]


class Result(BaseModel):
    """One fused result, as the task document holds it (merge rules: see dedup.py)."""

    rank: int
    score: float
    platform: str
    platforms: list[str]
    ranks: dict[str, int]
    title: str
    url: str = Field(description="the cleanest of the URLs the platforms gave (see dedup.py)")
    variants: list[UrlVariant] = Field(
        default_factory=list, description="every URL the platforms gave, first seen first"
    )
    snippet: str = ""
    content: str | None = None
    content_id: str | None = None
    published_at: datetime | None = None
    language: str | None = None
    retrieved_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)


class QueryFailure(BaseModel):
    """One query that failed on one platform (the platform's other queries may have run)."""

    platform: str
    query_index: int
    query: str
    error: str
    kind: FailureKind | None = Field(
        default=None, description="whose failure (a chain passes the query on for the provider's)"
    )


class QueryResults(BaseModel):
    query: str
    results: list[Result]
    failed: list[QueryFailure] = Field(
        default_factory=list, description="the platforms on which this query failed, and why"
    )


class Progress(BaseModel):
    percent: float = 0.0
    stage: str = "pending"
    message: str = ""


class StepProgress(BaseModel):
    current: int = 0
    total: int = 0


class PlatformError(BaseModel):
    platform: str
    state: PlatformState
    error: str


class Counters(BaseModel):
    """Fan-in counters: each platform is counted exactly once, when it reaches a terminal state."""

    done: int = 0
    failed: int = 0


class Summary(BaseModel):
    platforms: int
    succeeded: int
    failed: int
    timed_out: int
    cancelled: int = 0
    failed_queries: int = Field(default=0, description="(platform, query) pairs that failed")
    total_results: int
    message: str


class CallRecord(BaseModel):
    """One outbound call of a platform run (HTTP request or MCP tool call), for its document.

    Says where a run's time went and what failed, never a secret: URLs are recorded with their
    key parameters masked.
    """

    model_config = ConfigDict(validate_assignment=True)  # `error` is often set after the call

    platform: str
    method: str | None = None
    url: str | None = None
    tool: str | None = None
    status: int | None = None
    attempts: int = 0
    seconds: float = 0.0
    error: str | None = None
    cost_usd: float = Field(
        default=0.0,
        ge=0,
        description="what this call cost, by the platform's price list (pricing.py); 0: free, "
        "or not charged (a call the provider refused); a call sent that got no answer (cut by "
        "a cancel, the deadline or a timeout) counts at its held price: it may be billed",
    )
    hold: str | None = Field(
        default=None,
        description="the id of the hold that counted this call before it was sent "
        "(`PlatformRun.held_calls`); None: a free call, counted by nobody",
    )
    paced_s: float = Field(
        default=0.0, ge=0, description="seconds it waited for the provider's pace (pacing.py)"
    )

    @field_validator("url", "error")
    @classmethod
    def _no_secret(cls, value: str | None) -> str | None:
        """Redacted as set (`fanfuse.support.redact`), whoever sets it: the runner, an MCP tool
        call."""
        return redact(value) if value is not None else None


class CacheState(StrEnum):
    HIT = "hit"
    MISS = "miss"
    PARTIAL = "partial"
    """Some of the run's queries came from the cache, the others from the provider."""


class CacheNote(BaseModel):
    """How a platform run used the cache: `hit` with the age of the oldest entry it served."""

    state: CacheState
    mode: CacheMode
    age_s: float | None = Field(default=None, description="age of the oldest entry served")
    hits: int = 0
    misses: int = 0


class CacheEntry(BaseModel):
    """One (platform, query, options) answer kept for reuse: `cache/{key}` in either store."""

    key: str
    platform: str
    query: str
    limit: int = Field(description="the max_results it answered; it serves requests up to it")
    hits: list[Hit]
    provider: str | None = None
    stored_at: datetime
    expires_at: datetime


class LimitCut(BaseModel):
    """How a per-search cap (Settings.max_*_per_search) cut one platform run's work."""

    cap: int = Field(description="this platform's share: the search's cap / its platforms")
    used: int
    skipped: int = Field(description="calls refused (each ends a query's paging), pages unfetched")


class PlatformRun(BaseModel):
    """`searches/{task_id}/platforms/{name}`."""

    task_id: str
    name: str
    index: int = Field(description="1-based position among the task's platforms")
    of: int = Field(description="number of platforms in the task")
    state: PlatformState = PlatformState.QUEUED
    stage: str = "queued"
    stages: list[Stage] = Field(default_factory=lambda: [Stage.SEARCHING])
    progress: StepProgress = Field(default_factory=StepProgress)
    percent: float = 0.0
    message: str = "Queued"
    attempt: int = 0
    lease: str | None = Field(
        default=None, description="the worker token of the delivery that holds this run"
    )
    lease_until: datetime | None = Field(
        default=None, description="until when the lease holds (see lifecycle.claim)"
    )
    results: list[Hit] = Field(default_factory=list)
    error: str | None = None
    provider: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    calls: list[CallRecord] = Field(default_factory=list)
    held_calls: list[HeldCall] = Field(
        default_factory=list,
        description="provider calls counted before they were sent whose answers are not yet "
        "in `calls` (in flight, or their worker died): each counts as paid at its price",
    )
    options: dict[str, OptionUse] = Field(
        default_factory=dict, description="per request option: native, post_filter, not_applied"
    )
    failed_queries: list[QueryFailure] = Field(default_factory=list)
    failure: FailureKind | None = Field(
        default=None,
        description="`failed`: whose failure, as the breaker took it (captcha, rate_limited, "
        "denied, error, query, not_asked, internal)",
    )
    cache: CacheNote | None = None
    retry_at: datetime | None = Field(
        default=None, description="`suspended`: when the platform will be tried again"
    )
    limits: dict[str, LimitCut] = Field(
        default_factory=dict,
        description="per-search caps that cut this run (provider_calls, page_fetches); none: "
        "nothing was cut",
    )
    chain: list[str] = Field(
        default_factory=list,
        description="a fallback chain's members in order, this run's name first (`google|brave`); "
        "empty: no fallback",
    )
    member: int = Field(default=0, description="a chain: the index of the member whose turn it is")
    members: list[MemberRun] = Field(
        default_factory=list, description="a chain: each member asked or passed over, and why"
    )
    answered_by: list[str] = Field(
        default_factory=list, description="a chain: the members whose answers are its results"
    )
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime = Field(default_factory=utcnow)


class RerankNote(BaseModel):
    """How a `comprehensive` search's candidates were reranked, or why they were not."""

    method: str = Field(description='"llm", "offline:<name>", or "none"')
    model: str | None = None
    applied: bool = Field(description="false: the fused order was kept (see `error`)")
    candidates: int = Field(default=0, description="how many fused candidates were reranked")
    error: str | None = Field(default=None, description="why the fused order was kept")


class Task(BaseModel):
    """`searches/{task_id}`."""

    task_id: str
    owner: str | None = None
    request: SearchRequest
    queries: list[str]
    platforms: list[str]
    status: TaskStatus = TaskStatus.PENDING
    progress: Progress = Field(default_factory=Progress)
    counters: Counters = Field(default_factory=Counters)
    summary: Summary | None = None
    error: str | None = None
    errors: list[PlatformError] = Field(default_factory=list)
    fusion: FusionMethod
    results: list[Result] = Field(default_factory=list)
    results_by_query: list[QueryResults] = Field(default_factory=list)
    filtered: dict[str, int] = Field(
        default_factory=dict, description="per option, results the post-filters removed in all"
    )
    rerank: RerankNote | None = None
    cost: Cost = Field(
        default_factory=Cost,
        description="the receipt: per platform calls and USD, total, the budget it ran under",
    )
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    deadline_at: datetime
    expires_at: datetime
    finalized_at: datetime | None = None
    timeline: Timeline = Field(
        default_factory=Timeline,
        description="where the search's time went: per platform queued, started, first result, "
        "stages, finished; the fan-in and the finalization (wire/timeline.py)",
    )
    trace: str | None = Field(
        default=None,
        description="the W3C traceparent of the search's start, when it was traced: its trace "
        "id finds every span of the search in the tracing backend",
    )


class Preview(BaseModel):
    """While a search runs: the final answer's dedup and fusion over the platforms that have
    succeeded so far (rules.aggregate.preview), computed when status is read, never stored.
    Not reranked (an LLM call per read would be too slow) and not cut by the deadline."""

    results: list[Result] = Field(description="the fused results so far, ranked")
    results_by_query: list[QueryResults] = Field(
        default_factory=list, description="per query, as the final answer has (several queries)"
    )
    platforms: list[str] = Field(description="the platforms whose results it fuses")
    partial: Literal[True] = Field(default=True, description="always true: not the final answer")


class TaskView(Task):
    """What status() returns: the task merged with its platform documents."""

    platform_runs: list[PlatformRun] = Field(default_factory=list)
    preview: Preview | None = Field(
        default=None, description="running: the results so far; None once terminal or none came"
    )


class Accepted(BaseModel):
    task_id: str
    status: TaskStatus
    status_url: str
    cancel_url: str | None = Field(
        default=None, description="POST here to cancel the search (None: no cancel endpoint known)"
    )


class Problem(BaseModel):
    field: str
    problem: str


class ErrorBody(BaseModel):
    """The JSON body of every 4xx answer."""

    error: str
    message: str
    problems: list[Problem] = Field(default_factory=list)

    @field_validator("message")
    @classmethod
    def _no_secret(cls, value: str) -> str:
        """An error may quote a credential it refused; no answer may show one."""
        return redact(value)


class PlatformInfo(BaseModel):
    """One platform as `fanfuse platforms --json` and `GET /platforms` list it."""

    name: str
    available: bool
    reason: str | None = Field(default=None, description="why it is not available here")
    health: PlatformHealth | None = Field(
        default=None, description="its breaker and measured latency (None: never recorded)"
    )
    max_concurrency: int | None = Field(
        default=None,
        description="provider calls in flight per process in this deployment (None: a local "
        "platform that calls no provider)",
    )
    rate_limit: str | None = Field(
        default=None,
        description="the provider's documented limit the default concurrency derives from",
    )
    pace_per_second: float | None = Field(
        default=None,
        description="provider calls a second across the deployment's workers (pacing.py); None: "
        "not paced",
    )
    fallbacks: list[str] = Field(
        default_factory=list, description="the deployment's chain for it (Settings.chains)"
    )
