"""Named platform instances: a built-in engine under a name of its own, with its own settings.

A deployment declares them (`Settings.extra_platforms`, `FANFUSE_EXTRA_PLATFORMS`), and `fanfuse
index` registers local corpora as such (platforms/corpora.py); the platform registry builds each
one from its engine. Kept here, below both the settings and the platforms, since both speak it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ExtraPlatform(BaseModel):
    """A named instance of a built-in engine with its own settings."""

    engine: str
    settings: dict[str, Any] = Field(default_factory=dict, repr=False)  # may hold its api_key
