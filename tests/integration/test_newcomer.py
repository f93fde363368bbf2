"""A newcomer's first minutes, as the README tells them: index a folder of notes, search it,
edit the notes, index again, find the new one. The real `fanfuse` command in fresh processes,
with a fresh HOME and no FANFUSE_ variable, so nothing but the documented commands sets it up.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

NOTES = {
    "kayak.md": "# Kayak trip to the fjord\n\nWe paddled along the Geirangerfjord in July.\n",
    "bread.md": "---\ntitle: Sourdough starter\n---\nFeed the starter flour and water daily.\n",
    "budget.txt": "Quarterly budget review\n\nFinance wants the travel costs by Friday.\n",
}


def fanfuse_command() -> str:
    """The `fanfuse` script installed beside this interpreter (the one the README runs)."""
    found = Path(sys.executable).with_name("fanfuse")
    return str(found) if found.exists() else shutil.which("fanfuse") or "fanfuse"


def run(home: Path, *args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
    env.update(HOME=str(home), COLUMNS=str(columns), XDG_CACHE_HOME=str(home / ".cache"))
    done = subprocess.run(
        [fanfuse_command(), *args],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def first_results(home: Path, query: str, platform: str) -> list[dict[str, Any]]:
    task = json.loads(run(home, "search", query, "-p", platform, "--json").stdout)
    assert task["status"] == "completed", task
    results: list[dict[str, Any]] = task["results"]
    return results


@pytest.mark.slow
def test_index_a_folder_search_it_edit_it_search_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    notes = home / "notes"
    notes.mkdir(parents=True)
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")

    indexed = run(home, "index", "~/notes".replace("~", str(home))).stdout
    assert "3 documents" in indexed and "fanfuse search" in indexed and "-p notes" in indexed

    # The documented search: the table shows the note's own title and its file first (wide
    # enough for the long temporary path to fit on one line; tests/integration/test_columns.py
    # checks 80 columns).
    table = run(home, "search", "kayak fjord", "-p", "notes", columns=200).stdout
    kayak = (notes / "kayak.md").as_uri()
    assert kayak in table and "Kayak trip to the fjord" in table
    others = [(notes / n).as_uri() for n in NOTES if n != "kayak.md"]
    assert all(table.index(kayak) < table.index(u) for u in others if u in table)
    top = first_results(home, "kayak fjord", "notes")[0]
    assert top["url"] == kayak and top["title"] == "Kayak trip to the fjord"

    # A new note, an edited one, a deleted one: indexing again reads only what changed.
    (notes / "rolling.md").write_text("# Eskimo roll practice\n\nCold water, helmet on.\n")
    (notes / "budget.txt").write_text("Quarterly budget review\n\nMoved to Monday.\n")
    (notes / "bread.md").unlink()
    again = run(home, "index", str(notes)).stdout
    assert "1 added, 1 changed, 1 removed, 1 unchanged; 2 files read" in again
    assert "2 documents encoded, 1 kept" in again  # only the new and the edited note

    top = first_results(home, "eskimo roll", "notes")[0]
    assert top["url"] == (notes / "rolling.md").as_uri()
    assert not [r for r in first_results(home, "sourdough starter", "notes") if "bread" in r["url"]]
    fused = first_results(home, "eskimo roll", "notes, notes_vectors")[0]
    assert fused["url"] == (notes / "rolling.md").as_uri() and len(fused["platforms"]) == 2

    listed = run(home, "platforms").stdout
    assert any(line.startswith("notes ") and " yes " in line for line in listed.splitlines())
    # at 80 columns a long folder path is folded mid-word (pytest-xdist's temp paths are longer):
    # compared without the blanks and line breaks the folding puts in
    said = f"notes: BM25 over {notes.resolve()} (3 documents"
    assert "".join(said.split()) in "".join(listed.split())
