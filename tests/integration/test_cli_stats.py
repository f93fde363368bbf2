"""`fanfuse stats` over a scripted history written into a SQLite store
(tests/support/stats_history.py): the expected percentiles and unique counts, as JSON and as the
table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fanfuse.cli.main import app
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.models import utcnow
from tests.support import stats_history


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "history.db"
    store = SqliteStore(path)
    try:
        for search in stats_history.history(utcnow()):
            store.create(search.task, list(search.runs))
    finally:
        store.close()
    return path


def stats(db: Path, *args: str) -> tuple[int, str, str]:
    env = {"FANFUSE_DB_PATH": str(db), "COLUMNS": "200"}
    result = CliRunner().invoke(app, ["stats", "--sqlite", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_the_json_holds_the_expected_percentiles_and_unique_counts(db: Path) -> None:
    code, out, err = stats(db, "--json")
    assert code == 0, err
    figures = json.loads(out)
    stats_history.check_figures(figures)
    assert figures["scope"] == "all" and figures["window_s"] == 24 * 3600


def test_the_table_shows_them_one_row_a_platform(db: Path) -> None:
    code, out, err = stats(db)
    assert code == 0, err
    lines = out.splitlines()
    heads = lines[1].split()
    assert heads == ["platform", "runs", "p50", "p95", "cache", "results", "unique", "spend"]
    rows = {line.split()[0]: line for line in lines[3:] if not line.split()[0].endswith(":")}
    alpha = rows["alpha"]
    cells = [alpha[: len("platform")].strip(), *alpha[len("platform") :].split()]
    assert cells == ["alpha", "5", "0.30s", "0.88s", "6", "3", "$0.0500"]  # no cache figure
    assert rows["gamma"].split() == ["gamma", "5", "2.50s", "2.95s", "50%", "3", "1", "$0.0000"]
    notes = {line.split(":")[0]: line for line in lines if line.split()[0].endswith(":")}
    assert "failures: error 1, rate_limited 1" in notes["beta"]
    assert lines[0] == "5 searches (4 finished), last 24 h, scope all"


def test_one_owner_and_a_narrower_window(db: Path) -> None:
    code, out, _ = stats(db, "--json", "--owner", stats_history.OTHER)
    assert code == 0 and json.loads(out)["searches"] == 1
    code, out, _ = stats(db, "--json", "--window", "25m")
    assert code == 0 and json.loads(out)["searches"] == 2  # s5 and s4
    code, out, _ = stats(db, "--json", "--window", "3d")
    assert code == 0 and json.loads(out)["searches"] == 6  # s0 too


def test_a_bad_window_is_refused_naming_the_option(db: Path) -> None:
    code, _, err = stats(db, "--window", "tomorrow")
    assert code == 2 and "--window: a whole duration such as 30m" in err
