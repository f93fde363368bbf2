"""docs/configuration.md is what the settings models say (tools/configuration.py generates it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from fanfuse.settings import Settings, sources
from fanfuse.tools import configuration

PAGE = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_the_page_is_what_the_models_say() -> None:
    assert PAGE.read_text(encoding="utf-8") == configuration.render(), (
        "docs/configuration.md is stale: python -m fanfuse.tools.configuration > "
        "docs/configuration.md"
    )


def test_every_root_setting_is_on_the_page_with_its_variable() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for name, info in Settings.model_fields.items():
        for variable in sources.env_names("FANFUSE_", name, info):
            assert f"`{variable}`" in text


def test_a_field_is_read_with_its_description_or_docstring_and_nested_sections_walked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Inner(BaseSettings):
        timeout: float = 2.0
        """Seconds per call."""

    class Tree(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="X_", env_nested_delimiter="__")
        name: str = Field(default="n", description="a name")
        inner: Inner = Field(default_factory=Inner)
        plain: list[str] = Field(default_factory=list)
        """A list, as JSON."""

    monkeypatch.setenv("FANFUSE_TTL_MINUTES", "1")  # defaults are shown as if nothing were set
    got = list(configuration.rows(Tree, "X_"))
    assert got == [
        ("`X_NAME`", "str", "`n`", "a name"),
        ("`X_INNER__TIMEOUT`", "float", "`2.0`", "Seconds per call."),
        ("`X_PLAIN`", "list[str]", "`[]`", "A list, as JSON."),
    ]
    assert "`30.0`" in configuration.table(Settings, "FANFUSE_")
