"""The platform contract, in the manner of SearXNG's engines.

A platform declares its name, its settings (a pydantic-settings model: the platform is available
exactly when those settings validate) and its capabilities, and implements one async `search`.
HTTP platforms (see `http.py`) implement `search` through a pure request builder and a pure
response parser, leaving I/O, retries and limits to the shared runner.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from fanfuse.models import Hit


class PlatformSettings(BaseSettings):
    """Base of every platform's settings; subclasses set `env_prefix` (`FANFUSE_<NAME>_`)."""

    model_config = SettingsConfigDict(extra="ignore", env_file=None)

    timeout: float = 20.0
    max_concurrency: int = 4


class Capabilities(BaseModel):
    multi_query: bool = False
    content: bool = Field(default=False, description="hits carry page content already")
    resolves_urls: bool = Field(default=False, description="hit URLs may be redirects")
    languages: list[str] | None = None
    max_results_per_call: int = 100


class SearchParams(BaseModel):
    """What the service asks of a platform for one run."""

    queries: list[str]
    limit: int
    language: str | None = None
    include_content: bool = False


ProgressFn = Callable[[int, int, str], None]


@dataclass
class PlatformContext:
    """What a platform may use while it runs: its settings, the shared runner, progress."""

    settings: PlatformSettings
    runner: Any = None
    report: ProgressFn = field(default=lambda current, total, message: None)
    extras: dict[str, Any] = field(default_factory=dict)


class Platform(ABC):
    """One search platform. `name` and settings can be overridden per instance, so one engine
    can serve several named platforms (two SearXNG instances, say), as in SearXNG's settings."""

    name: str
    description: ClassVar[str] = ""
    settings_model: ClassVar[type[PlatformSettings]] = PlatformSettings
    capabilities: ClassVar[Capabilities] = Capabilities()

    def __init__(self, name: str | None = None, overrides: dict[str, Any] | None = None) -> None:
        if name is not None:
            self.name = name
        self.overrides = dict(overrides or {})

    def load_settings(self) -> PlatformSettings:
        return self.settings_model(**self.overrides)

    def availability(self) -> str | None:
        """None when the platform can run here, else why not (shown by `fanfuse platforms`)."""
        try:
            self.load_settings()
        except ValidationError as exc:
            missing = sorted(
                self.settings_env_name(str(err["loc"][0])) for err in exc.errors() if err["loc"]
            )
            return f"missing or invalid settings: {', '.join(missing)}"
        return None

    def settings_env_name(self, field_name: str) -> str:
        prefix = self.settings_model.model_config.get("env_prefix", "")
        return f"{prefix}{field_name}".upper()

    @abstractmethod
    async def search(self, ctx: PlatformContext, params: SearchParams) -> list[list[Hit]]:
        """Return one ranked list of hits per query, in query order."""


class ProviderError(Exception):
    """A platform failed in a way worth telling the user precisely (bad key, garbage body...)."""

    def __init__(self, platform: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(f"{platform}: {message}")
        self.platform = platform
        self.message = message
        self.retryable = retryable
