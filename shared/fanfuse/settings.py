"""Runtime settings: one place, read from `FANFUSE_*` environment variables (see README)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_cache_dir() -> Path:
    return Path(os.environ.get("FANFUSE_CACHE_DIR") or Path.home() / ".cache" / "fanfuse")


class ExtraPlatform(BaseModel):
    """A named instance of a built-in engine with its own settings."""

    engine: str
    settings: dict[str, Any] = Field(default_factory=dict)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FANFUSE_", extra="ignore")

    # Where and how long tasks live.
    project: str = Field(
        default="demo-fanfuse",
        validation_alias=AliasChoices("FANFUSE_PROJECT", "GOOGLE_CLOUD_PROJECT"),
    )
    region: str = "us-central1"
    db_path: Path = Field(default_factory=lambda: default_cache_dir() / "fanfuse.db")
    ttl_minutes: float = Field(default=30.0, gt=0)
    deadline_seconds: float = Field(default=120.0, gt=0)
    cache_ttl_seconds: float = Field(
        default=600.0,
        ge=0,
        description="how long a search answer is reused (0: no cache); per platform: "
        "FANFUSE_<PLATFORM>_CACHE_TTL",
    )
    progress_interval: float = Field(
        default=1.0, ge=0, description="minimum seconds between progress writes per platform"
    )
    # Cloud path: queues, function URLs, emulators, identities.
    queue_prefix: str = "fanfuse"
    tasks_emulator_host: str | None = None
    function_urls: dict[str, str] = Field(default_factory=dict)
    status_url_base: str | None = None
    tasks_service_account: str | None = None
    collection: str = "searches"
    firestore_write_log: Path | None = Field(
        default=None, description="append one JSON line per Firestore document write (tests)"
    )
    extra_platforms: dict[str, ExtraPlatform] = Field(default_factory=dict)
    deployed_platforms: list[str] | None = Field(
        default=None,
        description="set where platforms run elsewhere (start_search holds no provider keys): "
        "these are the available ones",
    )
