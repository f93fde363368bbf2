"""What the command prints fits the terminal: at 80 columns (a default terminal, and what rich
assumes when piped) and at 120, no line is wider, no name a user must type is cut, and no table
column is empty. `platforms`, `stats`, a search's result table, `eval`'s report, and the help of
every command."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import click
import pytest
from typer.main import get_command
from typer.testing import CliRunner

from fanfuse.cli.main import app
from fanfuse.platforms import Registry
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tools.evaluation.evaluate import EvalReport, EvalRun, render_report
from fanfuse.tools.evaluation.pipelines import Comparison
from fanfuse.wire.models import BreakerState, FailureKind, PlatformHealth, utcnow
from tests.support import stats_history
from tests.support.health_checks import put_health

WIDTHS = (80, 120)
LONG_NAME = "field_notes_from_the_archive_ab"  # 31 characters: near the longest corpus name
NOTES = {
    "kayak.md": "# Kayak trip to the fjord\n\nWe paddled along the Geirangerfjord in July.\n",
    "roll.md": "# Eskimo roll practice\n\nCold water, helmet on, kayak upside down.\n",
}


@pytest.fixture(autouse=True)
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in list(os.environ):
        if name.startswith("FANFUSE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("FANFUSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FANFUSE_DB_PATH", str(tmp_path / "state.db"))
    yield tmp_path


def run(width: int, *args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    return click.unstyle(result.stdout)


def assert_fits(text: str, width: int, content_cut: bool = False) -> None:
    """No line wider than the terminal, and no ellipsis: rich's mark of a cell cut to fit
    (`content_cut`: the output shows text that was shortened on purpose, Vaswani's derived
    titles and the snippets, so only the width is checked)."""
    wide = [line for line in text.splitlines() if len(line) > width]
    assert not wide, wide
    assert content_cut or "…" not in text, text


def column_spans(head: str) -> list[tuple[str, int, int]]:
    """Each head of a table's head line with the span of characters its column takes: from
    its first character to the next head's (right-aligned heads end where their column ends,
    so a span runs from the end of the previous head)."""
    found = [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+(?: \S+)*", head)]
    spans = []
    for i, (name, start, end) in enumerate(found):
        left = found[i - 1][2] if i else 0
        right = found[i + 1][1] if i + 1 < len(found) else 10_000
        spans.append((name, min(start, left), max(end, right)))
    return spans


def assert_no_empty_column(text: str) -> list[str]:
    """The table under its head line (the line above the rule): every column holds a value in
    some row. Returns the rows."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line and set(line) <= {"─", " "})
    head, rows = lines[rule - 1], []
    for line in lines[rule + 1 :]:
        if not line.strip() or line.split()[0].endswith(":"):
            break
        rows.append(line)
    assert rows
    for name, start, end in column_spans(head):
        assert any(row[start:end].strip() for row in rows), f"column {name!r} is empty"
    return rows


@pytest.mark.parametrize("width", WIDTHS)
def test_platforms_fits_and_names_every_variable_whole(width: int, env: Path) -> None:
    store = SqliteStore(env / "state.db")
    now = utcnow()
    put_health(
        store,
        PlatformHealth(
            name="docs",
            latency_s=0.018,
            samples=3,
            cold_start_s=8.7,
            updated_at=now,
            state=BreakerState.OPEN,
            reason=FailureKind.RATE_LIMITED,
            retry_at=now + timedelta(minutes=5),
        ),
    )
    store.close()
    text = run(width, "platforms")
    assert_fits(text, width)
    rows = assert_no_empty_column(text)
    registry = Registry.from_settings(Settings())
    assert [row.split()[0] for row in rows] == registry.names()
    words = " ".join(text.split())
    for info in registry.describe():
        for variable in re.findall(r"FANFUSE_[A-Z_]+", info.reason or ""):
            assert variable in words  # wrapped at spaces, never inside a name
    assert "docs: suspended (rate limited) until" in words
    docs = next(row for row in rows if row.startswith("docs "))
    assert "0.02s" in docs and "8.7s" in docs


@pytest.mark.parametrize("width", WIDTHS)
def test_stats_fits_and_keeps_only_columns_with_figures(width: int, env: Path) -> None:
    store = SqliteStore(env / "state.db")
    for search in stats_history.history(utcnow()):
        store.create(search.task, list(search.runs))
    store.close()
    text = run(width, "stats", "--sqlite")
    assert_fits(text, width)
    rows = assert_no_empty_column(text)
    assert {row.split()[0] for row in rows} >= {"alpha", "beta", "gamma"}
    assert "$0.0500" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_a_search_table_keeps_every_platform_name_and_url_whole(width: int, env: Path) -> None:
    notes = env / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    run(width, "index", str(notes), "--name", LONG_NAME, "--no-dense")
    text = run(width, "search", "kayak roll", "-p", f"{LONG_NAME}, docs")
    assert_fits(text, width, content_cut=True)
    assert f"{LONG_NAME}#1" in text and f"{LONG_NAME}#2" in text
    cells = "".join(
        line.split("│")[3].strip() for line in text.splitlines() if line.count("│") == 5
    )
    for name in NOTES:  # the URL may fold over lines inside its cell, whole
        assert (notes / name).as_uri() in cells
    assert "Kayak trip to the fjord" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_the_eval_report_fits(width: int) -> None:
    from rich.console import Console

    names = ["docs", "rrf", "pool_rm3_replace@100+content", "rrf@100(docs+rm3(fused))"]
    runs = [
        EvalRun(
            name=name,
            kind="requery" if "docs+" in name else "reranker",
            depth=100,
            default=name == "rrf",
            metrics={"nDCG@10": 0.4886, "AP@100": 0.2952, "RR@10": 0.7275, "R@100": 0.6511},
            comparisons=[
                Comparison(
                    baseline="rrf@10",
                    measure="nDCG@10",
                    delta=0.0226,
                    wins=40,
                    losses=37,
                    ties=16,
                    p_value=0.047,
                )
            ],
        )
        for name in names
    ]
    report = EvalReport(corpus="vaswani", documents=11429, queries=93, depth=100, runs=runs)
    console = Console(width=width, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(render_report(report))
    text = console.export_text()
    assert_fits(text, width)
    for name in names:
        assert sum(line.startswith(name + " ") for line in text.splitlines()) == 2


def subcommands(command: object) -> dict[str, Any]:
    """A group's commands by name (typer's groups are not click.Group subclasses)."""
    found: dict[str, Any] = getattr(command, "commands", {})
    return found


def commands() -> list[list[str]]:
    """Every command path: `search`, `keys create`, `bench latency`..."""
    paths: list[list[str]] = []
    for name, command in subcommands(get_command(app)).items():
        inner = subcommands(command)
        paths += [[name, sub] for sub in inner] if inner else [[name]]
    return paths


@pytest.mark.parametrize("width", WIDTHS)
def test_every_help_fits_and_names_every_option_whole(width: int) -> None:
    checked = 0
    for path in [[], *commands()]:
        text = run(width, *path, "--help")
        assert_fits(text, width)
        command: Any = get_command(app)
        for name in path:
            command = subcommands(command)[name]
        for param in command.params:
            for option in (*param.opts, *param.secondary_opts):
                if option.startswith("-"):
                    checked += 1
                    assert re.search(rf"(^|[\s,/]){re.escape(option)}(\s|,|$)", text, re.M), (
                        path,
                        option,
                    )
    assert checked > 100  # every command's options, not an empty walk
