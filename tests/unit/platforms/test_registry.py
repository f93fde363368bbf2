"""The registry: built-ins, named instances of an engine, and deployed platforms."""

from __future__ import annotations

from pathlib import Path

import pytest

from fanfuse.platforms import Registry
from fanfuse.settings import Settings
from fanfuse.wire.instances import ExtraPlatform


def test_named_instance_takes_its_own_settings(tmp_path: Path) -> None:
    corpus = tmp_path / "notes.jsonl"
    corpus.write_text('{"id": "1", "title": "t", "text": "hello world"}\n')
    registry = Registry(
        extra={"notes": ExtraPlatform(engine="docs", settings={"corpus": str(corpus)})},
        deployed=None,
    )
    assert "notes" in registry.names()
    notes = registry.get("notes")
    assert notes.name == "notes"
    assert notes.load_settings().corpus == corpus
    assert registry.get("docs").load_settings().corpus is None


def test_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown engine 'bing'"):
        Registry(extra={"x": ExtraPlatform(engine="bing")})


def test_deployed_platforms_decide_availability(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FANFUSE_DEPLOYED_PLATFORMS", '["docs", "google"]')
    registry = Registry.from_settings(Settings())
    assert registry.available() == ["docs", "google"]
    assert registry.unavailable_reason("vectors") == "not deployed"


def test_web_platforms_say_which_settings_are_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("FANFUSE_GOOGLE_API_KEY", "FANFUSE_GOOGLE_CX", "FANFUSE_DEPLOYED_PLATFORMS"):
        monkeypatch.delenv(var, raising=False)
    reason = Registry().unavailable_reason("google")
    assert reason is not None and "FANFUSE_GOOGLE_API_KEY" in reason
