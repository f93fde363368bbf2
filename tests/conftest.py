from __future__ import annotations

import os
from pathlib import Path

import pytest
from fanfuse.settings import Settings


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Index caches go to FANFUSE_CACHE_DIR when CI sets it, else to one temp dir per session."""
    if not os.environ.get("FANFUSE_CACHE_DIR"):
        monkeypatch.setenv("FANFUSE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(db_path=tmp_path / "fanfuse.db", progress_interval=0.0, deadline_seconds=30)
