"""Wire formats: the request, the task and platform documents, results.

These pydantic models are the only shapes that cross a boundary (HTTP, Firestore, SQLite, Cloud
Tasks bodies), so both runtimes store and return exactly the same documents.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

MAX_QUERIES = 5
MAX_QUERY_CHARS = 500


def utcnow() -> datetime:
    return datetime.now(UTC)


class FusionMethod(StrEnum):
    """How per-platform ranked lists become one list (see fusion.py and fusers.py)."""

    RRF = "rrf"
    SCORE = "score"
    CONCAT = "concat"


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

    @property
    def terminal(self) -> bool:
        return self not in (PlatformState.QUEUED, PlatformState.RUNNING)


class Stage(StrEnum):
    """A platform run's stages, in order; a run skips the ones it has no work for."""

    SEARCHING = "searching"
    RESOLVING = "resolving"
    FETCHING_CONTENT = "fetching_content"
    COMPRESSING = "compressing"


_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def split_platforms(value: Any) -> list[str]:
    """`"docs, Vectors"` or `["docs", "vectors"]` -> `["docs", "vectors"]` (lower, deduped)."""
    if isinstance(value, str):
        parts = value.split(",")
    elif isinstance(value, list | tuple):
        parts = []
        for item in value:
            if not isinstance(item, str):
                raise ValueError("platform names must be strings")
            parts.extend(item.split(","))
    else:
        raise ValueError("platform must be a string or a list of strings")
    names: list[str] = []
    for part in parts:
        name = part.strip().lower()
        if name and name not in names:
            names.append(name)
    return names


class SearchRequest(BaseModel):
    """What an app sends. Validate with `context={"available": [...]}` to check platform names."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    query: list[str] = Field(description="one query, or a list of 1-5 queries")
    platform: list[str] = Field(
        default="all",  # type: ignore[assignment]
        validate_default=True,
        description='"all", one name, comma-separated names, or a list; resolved to names',
    )
    max_results: Annotated[int, Field(ge=1, le=100)] = 10
    include_content: bool = False
    fusion: FusionMethod | None = Field(
        default=None, description="fuser; None means the default fuser (fusers.DEFAULT_FUSION)"
    )
    language: Annotated[str, Field(pattern=r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})?$")] | None = None
    weights: dict[str, Annotated[float, Field(ge=0, le=100)]] | None = None

    @field_validator("query", mode="before")
    @classmethod
    def _queries(cls, value: Any) -> list[str]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise ValueError("query must be a string or a list of strings")
        if not value:
            raise ValueError("query must not be empty")
        if len(value) > MAX_QUERIES:
            raise ValueError(f"at most {MAX_QUERIES} queries per request, got {len(value)}")
        queries: list[str] = []
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise ValueError(f"query {i + 1} must be a string")
            text = item.strip()
            if not text:
                raise ValueError(f"query {i + 1} is empty")
            if len(text) > MAX_QUERY_CHARS:
                raise ValueError(
                    f"query {i + 1} has {len(text)} characters; at most {MAX_QUERY_CHARS}"
                )
            queries.append(text)
        return queries

    @field_validator("platform", mode="before")
    @classmethod
    def _platforms(cls, value: Any, info: ValidationInfo) -> list[str]:
        names = split_platforms(value)
        if not names:
            raise ValueError("platform selection is empty")
        available = _available(info)
        if available is None:
            return names
        if "all" in names:
            if len(names) > 1:
                raise ValueError('"all" cannot be combined with other platform names')
            if not available:
                raise ValueError("no platform is available (see `fanfuse platforms`)")
            return list(available)
        unavailable = (info.context or {}).get("unavailable", {})
        not_here = [n for n in names if n in unavailable]
        if not_here:
            reasons = "; ".join(f"{n!r}: {unavailable[n]}" for n in not_here)
            raise ValueError(
                f"platform not available here ({reasons}); "
                f"available: {', '.join(available) or 'none'}"
            )
        unknown = [n for n in names if n not in available]
        if unknown:
            quoted = ", ".join(repr(n) for n in unknown)
            raise ValueError(
                f"unknown platform {quoted}; available: {', '.join(available) or 'none'}"
            )
        return names

    @field_validator("weights")
    @classmethod
    def _weights(
        cls, value: dict[str, float] | None, info: ValidationInfo
    ) -> dict[str, float] | None:
        if value is None:
            return None
        lowered = {k.strip().lower(): v for k, v in value.items()}
        chosen = info.data.get("platform")
        if chosen:
            unknown = sorted(set(lowered) - set(chosen))
            if unknown:
                raise ValueError(
                    f"weights name platforms not in the selection: {', '.join(unknown)}"
                )
        return lowered

    @model_validator(mode="after")
    def _resolved(self) -> SearchRequest:
        for name in self.platform:
            if name != "all" and not _NAME.match(name):
                raise ValueError(f"platform name {name!r} is not a valid name")
        return self

    @property
    def queries(self) -> list[str]:
        return self.query

    @property
    def platforms(self) -> list[str]:
        return self.platform


def _available(info: ValidationInfo) -> list[str] | None:
    ctx = info.context or {}
    available = ctx.get("available")
    return list(available) if available is not None else None


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


class QueryResults(BaseModel):
    query: str
    results: list[Result]


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
    total_results: int
    message: str


class CallRecord(BaseModel):
    """One outbound call of a platform run (HTTP request or MCP tool call), for its document.

    Says where a run's time went and what failed, never a secret: URLs are recorded with their
    key parameters masked.
    """

    platform: str
    method: str | None = None
    url: str | None = None
    tool: str | None = None
    status: int | None = None
    attempts: int = 0
    seconds: float = 0.0
    error: str | None = None


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
    results: list[Hit] = Field(default_factory=list)
    error: str | None = None
    provider: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    calls: list[CallRecord] = Field(default_factory=list)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime = Field(default_factory=utcnow)


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
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    deadline_at: datetime
    expires_at: datetime
    finalized_at: datetime | None = None


class TaskView(Task):
    """What status() returns: the task merged with its platform documents."""

    platform_runs: list[PlatformRun] = Field(default_factory=list)


class Accepted(BaseModel):
    task_id: str
    status: TaskStatus
    status_url: str


class Problem(BaseModel):
    field: str
    problem: str


class ErrorBody(BaseModel):
    """The JSON body of every 4xx answer."""

    error: str
    message: str
    problems: list[Problem] = Field(default_factory=list)
