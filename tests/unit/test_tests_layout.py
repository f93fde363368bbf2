"""The tests' own floor plan (tests/support/layout.py): a unit test sits in the folder of the
layer it tests, helpers in tests/support, every folder of Python files is a package. A test
added in the old flat tests/unit/ (or a helper at tests/ root) fails here, and
`scripts/place-tests --fix` moves it and rewrites its references."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support import layout

FIX = "scripts/place-tests --fix (then ruff check --fix . && ruff format .)"


def test_every_test_and_helper_is_where_the_layout_says() -> None:
    moves = layout.misplaced()
    listed = "\n".join(
        f"  {m.source.relative_to(layout.REPO)} -> {m.target.relative_to(layout.REPO)} ({m.why})"
        for m in moves
    )
    assert not moves, f"out of place; run {FIX}:\n{listed}"


def test_every_folder_of_python_files_is_a_package() -> None:
    missing = [str(p.relative_to(layout.REPO)) for p in layout.missing_packages()]
    assert not missing, f"add these (or run {FIX}): {missing}"


def test_the_placed_table_names_only_files_that_exist_where_it_says() -> None:
    for name, folder in layout.PLACED.items():
        assert (layout.UNIT / folder / name).is_file(), (name, folder)
        assert not folder or folder in layout.layers(), (name, folder)


def unit_test(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "source", "folder"),
    [
        # step 2: a layer named by the file name (or its singular), the last one
        ("test_quota_store.py", "from fanfuse.rules import quota\nquota.x\n", "store"),
        ("test_platform_specifics.py", "from fanfuse.net.runner import R\nR\n", "platforms"),
        ("test_content_stages.py", "", "stages"),
        # step 3: a module named by the leading words, longest first
        ("test_lifecycle_claim.py", "from fanfuse.wire.models import T\nT\n", "rules"),
        ("test_tasks_retry.py", "", "tools"),
        # step 4: the names used most; wire and support only when nothing else is used
        (
            "test_anything.py",
            """\
            from fanfuse.wire.models import Hit, Task
            from fanfuse.fusion.fuse import fuse
            Hit(), Task(), Hit(), fuse()
            """,
            "fusion",
        ),
        ("test_anything.py", "from fanfuse.wire.models import Hit\nHit()\n", "wire"),
        (
            "test_anything.py",
            """\
            from fanfuse.net import guard
            from fanfuse.content.fetch import fetch_page
            def test() -> None:
                guard.x, fetch_page()
            """,
            "net",  # a tie: the layer imported first
        ),
        ("test_anything.py", "import os\n", None),  # nothing to go by: PLACED must say
        # step 1: the table wins over the name
        ("test_http_contract.py", "", "platforms"),
    ],
)
def test_the_rule_reads_the_name_then_the_modules_then_the_uses(
    tmp_path: Path, name: str, source: str, folder: str | None
) -> None:
    assert layout.expected_folder(unit_test(tmp_path, name, source)) == folder


def test_the_rewrite_follows_every_form_of_reference_to_a_moved_file() -> None:
    root = layout.REPO
    renames = {
        root / "tests/fakes.py": root / "tests/support/fakes.py",
        root / "tests/unit/platforms/cases.py": root / "tests/support/platforms/cases.py",
        root / "tests/unit/test_guard.py": root / "tests/unit/net/test_guard.py",
    }
    before = textwrap.dedent(
        """\
        from tests.fakes import FakePlatform
        from tests import fakes
        from tests import fakes as f
            from tests.unit.platforms import cases
        import tests.unit.test_guard
        # tests/unit/test_guard.py::test_x, tests/fakes.py, not tests/fakes_2.py
        x = "tests.fakes.FakePlatform"
        """
    )
    after = textwrap.dedent(
        """\
        from tests.support.fakes import FakePlatform
        from tests.support import fakes
        from tests.support import fakes as f
            from tests.support.platforms import cases
        import tests.unit.net.test_guard
        # tests/unit/net/test_guard.py::test_x, tests/support/fakes.py, not tests/fakes_2.py
        x = "tests.support.fakes.FakePlatform"
        """
    )
    assert layout.rewrite(before, renames) == after
    deeper = "ROOT = Path(__file__).resolve().parents[2]\n"
    assert layout.deepen(deeper, 1) == "ROOT = Path(__file__).resolve().parents[3]\n"
