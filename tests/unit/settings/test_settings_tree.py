"""One settings tree, and `fanfuse config`: every value with where it came from, secrets masked.

The tree reads code, then the environment, then the dotenv file FANFUSE_ENV_FILE names, for the
root's fields, its sections (under their own prefixes) and each platform's settings alike; the
command shows what was read and from where, and never a secret's value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from fanfuse.cli.main import app
from fanfuse.platforms import Registry
from fanfuse.platforms.brave import BraveSettings
from fanfuse.platforms.contract import PlatformContext, SearchParams
from fanfuse.settings import Settings, get_settings
from fanfuse.settings.effective import MASK, Effective, effective, masked
from fanfuse.settings.sources import Origin
from fanfuse.wire.instances import ExtraPlatform

SECRET = "s3cr3t-value-that-must-not-show"


@pytest.fixture
def env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A dotenv file that sets a root field, a section's and a platform's, and one that the
    environment sets too (the environment wins)."""
    path = tmp_path / "fanfuse.env"
    path.write_text(
        "FANFUSE_REGION=europe-west1\n"
        "FANFUSE_CONTENT_TIMEOUT=4\n"
        "FANFUSE_BRAVE_COUNTRY=de\n"
        f"FANFUSE_BRAVE_API_KEY={SECRET}-file\n"
        "FANFUSE_TTL_MINUTES=7\n"
    )
    monkeypatch.setenv("FANFUSE_ENV_FILE", str(path))
    monkeypatch.setenv("FANFUSE_TTL_MINUTES", "5")
    for name in ("REGION", "CONTENT_TIMEOUT", "BRAVE_COUNTRY", "BRAVE_API_KEY"):
        monkeypatch.delenv(f"FANFUSE_{name}", raising=False)
    return path


def rows_by_name(rows: list[Effective]) -> dict[str, Effective]:
    return {row.name: row for row in rows}


def test_the_tree_reads_code_then_environment_then_file(env_file: Path) -> None:
    settings = get_settings()
    assert settings is get_settings()  # one tree per process, cached
    assert settings.env_file_read == env_file
    assert settings.region == "europe-west1"  # the file
    assert settings.ttl_minutes == 5.0  # the environment over the file
    assert settings.content.timeout == 4.0  # a section, under its own prefix, from the file
    brave = settings.platform(BraveSettings, "FANFUSE_BRAVE_")
    assert brave.country == "de"  # a platform's, through the tree, from the file
    assert brave.api_key.get_secret_value() == f"{SECRET}-file"
    assert settings.platform(BraveSettings, "FANFUSE_BRAVE_", {"country": "fr"}).country == "fr"
    given = Settings(ttl_minutes=9, _env_file=env_file)
    assert (given.ttl_minutes, given.region) == (9.0, "europe-west1")
    assert Settings(_env_file=None).region == "us-central1"  # no file when none is named


def test_registry_platforms_read_their_settings_through_the_tree(env_file: Path) -> None:
    registry = Registry.from_settings(get_settings())
    assert registry.get("brave").load_settings().country == "de"


def test_each_value_says_where_it_came_from(
    env_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FANFUSE_CONTENT_ALLOW_LOOPBACK", "true")
    settings = Settings(deadline_seconds=60, _env_file=env_file)
    rows = rows_by_name(effective(settings))
    assert rows["region"].origin is Origin.FILE
    assert rows["ttl_minutes"].origin is Origin.ENVIRONMENT
    assert rows["deadline_seconds"].origin is Origin.CODE
    assert rows["collection"].origin is Origin.DEFAULT
    assert rows["content.timeout"].origin is Origin.FILE
    assert rows["content.allow_loopback"].origin is Origin.ENVIRONMENT
    assert rows["content.max_bytes"].origin is Origin.DEFAULT
    assert rows["content.timeout"].variables == ["FANFUSE_CONTENT_TIMEOUT"]
    assert rows["project"].variables == ["FANFUSE_PROJECT", "GOOGLE_CLOUD_PROJECT"]
    assert rows["region"].value == "europe-west1"
    assert rows["ttl_minutes"].value == 5.0


def test_secrets_are_masked_wherever_they_sit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FANFUSE_TASKS_HMAC_SECRET", SECRET)
    monkeypatch.setenv("FANFUSE_CONTENT_LLM_API_KEY", SECRET)
    extra = {"team": {"engine": "searxng", "settings": {"base_url": "u", "api_key": SECRET}}}
    monkeypatch.setenv("FANFUSE_EXTRA_PLATFORMS", json.dumps(extra))
    rows = rows_by_name(effective(Settings()))
    assert rows["tasks_hmac_secret"].value == MASK and rows["tasks_hmac_secret"].secret
    assert rows["content.llm_api_key"].value == MASK
    assert rows["rerank_llm.api_key"].value is None  # unset: shown as unset, not masked
    assert rows["extra_platforms"].value["team"]["settings"] == {"base_url": "u", "api_key": MASK}
    assert SECRET not in json.dumps([row.model_dump(mode="json") for row in rows.values()])


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (SecretStr("x" * 20), MASK),
        ({"token": "abc", "n": 1}, {"token": MASK, "n": 1}),
        ([Path("/a"), None], ["/a", None]),
        ({"password": None}, {"password": None}),
    ],
)
def test_what_masking_shows(value: Any, shown: Any) -> None:
    assert masked(value) == shown


def test_fanfuse_config_prints_a_table_and_json(
    env_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FANFUSE_BRAVE_API_KEY", SECRET)
    monkeypatch.setenv("FANFUSE_TASKS_HMAC_SECRET", SECRET)
    monkeypatch.setenv("COLUMNS", "100")
    table = CliRunner().invoke(app, ["config", "--platform", "brave"])
    assert table.exit_code == 0, table.output
    assert SECRET not in table.output
    lines = {line.split()[0]: line.split()[1:] for line in table.output.splitlines() if line}
    assert lines["FANFUSE_REGION"] == ["file", "europe-west1"]
    assert lines["FANFUSE_TTL_MINUTES"] == ["environment", "5.0"]
    assert lines["FANFUSE_COLLECTION"] == ["default", "searches"]
    assert lines["FANFUSE_BRAVE_API_KEY"] == ["environment", MASK]
    assert lines["FANFUSE_BRAVE_COUNTRY"] == ["file", "de"]

    answer = CliRunner().invoke(app, ["config", "--json", "--set"])
    assert answer.exit_code == 0, answer.output
    assert SECRET not in answer.output
    rows = {row["name"]: row for row in json.loads(answer.output)}
    assert rows["region"] == {
        "name": "region",
        "variables": ["FANFUSE_REGION"],
        "value": "europe-west1",
        "origin": "file",
        "secret": False,
    }
    assert rows["tasks_hmac_secret"]["value"] == MASK
    assert {row["origin"] for row in rows.values()} <= {"environment", "file", "code"}


def test_fanfuse_config_refuses_an_unknown_platform() -> None:
    result = CliRunner().invoke(app, ["config", "--platform", "nope"])
    assert result.exit_code == 2
    assert "unknown platform 'nope'" in result.output


async def test_the_indexes_go_under_the_trees_cache_dir(tmp_path: Path) -> None:
    """`Settings.cache_dir`, however it is set (here: in code), is where a local corpus's index
    is kept: the platforms read it from their tree, not FANFUSE_CACHE_DIR behind it."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("fusion of ranked lists from many search platforms")
    (folder / "b.txt").write_text("a recipe for bread")
    mine = tmp_path / "mine"
    extra = {"notes": ExtraPlatform(engine="docs", settings={"corpus": str(folder)})}
    settings = Settings(cache_dir=mine, extra_platforms=extra)
    platform = Registry.from_settings(settings).get("notes")
    assert platform.cache_root == mine
    params = SearchParams(queries=["ranked lists fusion"], limit=1)
    hits = await platform.search(PlatformContext(settings=platform.settings()), params)
    assert [h.title for h in hits[0]] == ["fusion of ranked lists from many search platforms"]
    assert any((mine / "indexes").iterdir())
