"""Where a test file lives, and the command that puts it there.

tests/ has two axes. The first is the environment a test needs, one folder each:

- `unit/`: one process; the stores on SQLite (and DynamoDB on moto's in-process server for the
  `every_store` tests), providers as servers on 127.0.0.1, no emulator;
- `integration/`: real processes and servers on this machine: `fanfuse serve`, the MCP server,
  headless chromium, the local stacks of `fanfuse dev`, model and index builds;
- `e2e/`: the emulator stacks end to end: Firestore and Cloud Tasks emulators with the real
  functions-framework, and the AWS stack (moto's server, the Lambda handlers);
- `aws/`: the AWS ports and fronts on moto's server;
- `infra/`: Terraform plans, checkov, the Firestore rules on the emulator, the rehearsal.

The second axis, inside `unit/` only, is the layer: `tests/unit/<layer>/test_*.py` mirrors
`shared/fanfuse/<layer>/` (`tests/unit/rules/test_lifecycle_claim.py` tests
`fanfuse/rules/lifecycle.py`). A unit test belongs to the folder `expected_folder` names:

1. `PLACED`, when the file is listed there with its reason: the few cross-cutting tests that
   stay in `tests/unit/` itself, and tests whose name would mislead the rule;
2. else the layer named by the file name: the last word of `test_<words>.py` that is a layer's
   name, or its singular (`test_quota_store.py` -> `store`, `test_budget_rules.py` -> `rules`,
   `test_platform_specifics.py` -> `platforms`);
3. else the layer holding a module or package named by the file name's leading words, longest
   first (`test_lifecycle_claim.py` -> `rules/lifecycle.py`, `test_tasks_retry.py` ->
   `tools/devstack/tasks_retry.py`); when several layers hold one, the one of them the file uses
   most (step 4's count), or step 4 when it uses none of them;
4. else the layer whose imported names the file uses most: every use of a name imported from
   `fanfuse.<layer>` counts; `wire` and `support`, the vocabulary every layer speaks, win only
   when nothing else is used; a tie goes to the layer imported first.

Helper modules (fakes, doubles, contracts shared by several tests) live in `tests/support/`,
named as before their move (`tests/fakes.py` -> `tests/support/fakes.py`,
`tests/e2e/cloud.py` -> `tests/support/e2e/cloud.py`); fixtures live in `conftest.py` files.
Test folders hold `test_*.py`, `conftest.py` and `__init__.py` only (and data: `fixtures/`,
`mcp_tasks_client/`); every folder of Python files is a package, so each test module has one
dotted name however it is imported.

`python -m tests.support.layout` (or `scripts/place-tests`) lists what is out of place;
`--fix` moves it with `git mv` and rewrites every reference to the moved files (imports, dotted
names, paths in docs and code, `Path(__file__).parents[n]` for the new depth).
`tests/unit/test_tests_layout.py` fails on anything out of place and names that command.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
UNIT = TESTS / "unit"
SUPPORT = TESTS / "support"
LIBRARY = REPO / "shared" / "fanfuse"

KINDS = ("unit", "integration", "e2e", "aws", "infra")
"""The environment folders; `support` holds the helpers."""
DATA = ("fixtures", "mcp_tasks_client")
"""Folders of data, not Python packages: left alone."""
VOCABULARY = frozenset({"wire", "support"})

PLACED: dict[str, str] = {
    # cross-cutting: they test the tree or the test harness, not one layer ("" is tests/unit/)
    "test_layers.py": "",  # the floor plan of every layer
    "test_loopback_only.py": "",  # the test harness's network guard
    "test_settings_roots.py": "",  # settings.py at the package root, read by every root
    "test_tests_layout.py": "",  # this layout
    # named after a platform-side concept that shares a word with another layer
    "test_http_contract.py": "platforms",  # platforms/http_api.py's adapters, not the http layer
    "test_options_native.py": "platforms",  # what each adapter applies natively
    "test_page_failures.py": "stages",  # StageRun.each_hit: a page's failure stays with its hit
    "test_stats_query.py": "http",  # http/stats_route.py's query, not the `fanfuse stats` command
    "test_trace_headers.py": "fronts",  # every front's trace-header parsing, not `fanfuse trace`
}
"""Unit tests whose folder the rule would not find: file name -> folder under tests/unit/."""

HELPERS_MOVED: dict[str, str] = {
    **{
        f"tests/{name}.py": f"tests/support/{name}.py"
        for name in (
            "aws_fixtures",
            "browser",
            "budget_checks",
            "fakes",
            "health_checks",
            "hostile_pages",
            "keys_checks",
            "loopback",
            "mcp_harness",
            "option_scenarios",
            "quota_checks",
            "signing",
            "stats_history",
            "store_contract",
        )
    },
    "tests/unit/platforms/harness.py": "tests/support/platforms/harness.py",
    "tests/unit/platforms/cases.py": "tests/support/platforms/cases.py",
    "tests/e2e/cloud.py": "tests/support/e2e/cloud.py",
    "tests/e2e/aws.py": "tests/support/e2e/aws.py",
    "tests/e2e/schemathesis_cli.py": "tests/support/e2e/schemathesis_cli.py",
}
"""Helpers moved to tests/support by issue 31, so that `--fix` rewrites their old imports in
tests written before the move (on branches merged after it). A new helper elsewhere moves
by the same rule: `tests/<x>.py` -> `tests/support/<x>.py`, `tests/<kind>/<x>.py` ->
`tests/support/<kind>/<x>.py`."""


@cache
def layers() -> tuple[str, ...]:
    """The library's layers: its packages (a folder with an `__init__.py`)."""
    return tuple(sorted(p.name for p in LIBRARY.iterdir() if (p / "__init__.py").is_file()))


@cache
def modules_named(name: str) -> frozenset[str]:
    """The layers holding a module or package called `name`, at any depth."""
    found = set()
    for layer in layers():
        for path in (LIBRARY / layer).rglob(f"{name}*"):
            if path.stem == name and (path.suffix == ".py" or (path / "__init__.py").is_file()):
                found.add(layer)
    return frozenset(found)


def layer_uses(source: str) -> tuple[Counter[str], list[str]]:
    """How often the file uses names it imports from each layer, and the layers in the order
    they are first imported (imports at any depth: inside functions too)."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}
    order: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] != "fanfuse":
                continue
            for alias in node.names:
                layer = alias.name if len(parts) == 1 else parts[1]
                if layer in layers():
                    bound[alias.asname or alias.name] = layer
                    order.append(layer)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                # `import fanfuse.x.y` binds `fanfuse`, no layer: only `as` names count
                parts = alias.name.split(".")
                layer = parts[1] if len(parts) > 1 and alias.asname else ""
                if parts[0] == "fanfuse" and alias.asname and layer in layers():
                    bound[alias.asname] = layer
                    order.append(layer)
    used = Counter(
        bound[node.id] for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id in bound
    )
    return used, list(dict.fromkeys(order))


def most_used(used: Counter[str], order: list[str], among: Iterable[str]) -> str | None:
    """Step 4 (over `among`): the most used layer; the vocabulary only when nothing else is
    used; a tie to the layer imported first."""
    pool = [layer for layer in among if used[layer]]
    if not pool:
        return None
    first = {layer: i for i, layer in enumerate(order)}
    return max(pool, key=lambda x: (x not in VOCABULARY, used[x], -first.get(x, len(first))))


def expected_folder(path: Path) -> str | None:
    """The folder under tests/unit/ that the unit test at `path` belongs to (`""`: tests/unit/
    itself), by the module docstring's rule; None when no rule finds one."""
    if path.name in PLACED:
        return PLACED[path.name]
    words = path.stem.removeprefix("test_").split("_")
    named = [layer for w in words for layer in layers() if w in (layer, layer.removesuffix("s"))]
    if named:
        return named[-1]
    used, order = layer_uses(path.read_text(encoding="utf-8"))
    for n in range(len(words), 0, -1):
        holders = modules_named("_".join(words[:n]))
        if len(holders) == 1:
            return next(iter(holders))
        if holders:
            return most_used(used, order, sorted(holders)) or most_used(used, order, order)
    return most_used(used, order, order)


# ---------------------------------------------------------------------------------------------
# What is out of place


@dataclass(frozen=True)
class Move:
    source: Path
    target: Path
    why: str


def python_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(TESTS).parts
        if parts[0] in DATA or "node_modules" in parts or "__pycache__" in parts:
            continue
        yield path


def helper_target(path: Path) -> Path:
    """Where a helper module at `path` belongs: tests/support/, under its environment folder
    when it sits in one (tests/e2e/cloud.py -> tests/support/e2e/cloud.py)."""
    moved = HELPERS_MOVED.get(path.relative_to(REPO).as_posix())
    if moved is not None:
        return REPO / moved
    parts = path.relative_to(TESTS).parts
    return SUPPORT.joinpath(*parts) if len(parts) > 1 else SUPPORT / path.name


def misplaced() -> list[Move]:
    """Every file that is not where the layout says, with where it belongs."""
    moves = []
    for path in python_files(TESTS):
        relative = path.relative_to(TESTS)
        is_test = path.name.startswith("test_")
        if relative.parts[0] == "support":
            if is_test:
                moves.append(Move(path, UNIT / path.name, "a test among the helpers"))
            continue
        if path.name in ("__init__.py", "conftest.py"):
            continue
        if not is_test:
            moves.append(Move(path, helper_target(path), "a helper outside tests/support"))
            continue
        if len(relative.parts) == 1 or relative.parts[0] not in KINDS:
            moves.append(Move(path, UNIT / path.name, "a test outside the environment folders"))
            continue
        if relative.parts[0] != "unit":
            continue
        folder = expected_folder(path)
        if folder is None:
            moves.append(Move(path, path, "no layer found: add it to PLACED with its folder"))
            continue
        target = UNIT / folder / path.name
        if target != path:
            moves.append(Move(path, target, f"tests {folder or 'more than one layer'}"))
    return moves


def missing_packages() -> list[Path]:
    """Folders of Python files without an `__init__.py` (two test modules of one name would
    collide in pytest's import, and one module could be imported under two names)."""
    folders = {p.parent for p in python_files(TESTS)} | {TESTS}
    return sorted(f / "__init__.py" for f in folders if not (f / "__init__.py").is_file())


# ---------------------------------------------------------------------------------------------
# The fix: git mv, then rewrite every reference


def dotted(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


def rewrite(text: str, renames: dict[Path, Path]) -> str:
    """`text` with every reference to a renamed file pointed at its new place: paths
    (`tests/fakes.py`), dotted names (`tests.fakes`) and `from tests import fakes`."""
    for old, new in sorted(renames.items(), key=lambda kv: -len(str(kv[0]))):
        old_path, new_path = old.relative_to(REPO).as_posix(), new.relative_to(REPO).as_posix()
        text = re.sub(rf"(?<![\w/.-]){re.escape(old_path)}(?![\w])", new_path, text)
        old_name, new_name = dotted(old), dotted(new)
        old_parent, leaf = old_name.rsplit(".", 1)
        new_parent, new_leaf = new_name.rsplit(".", 1)
        alias = "" if new_leaf == leaf else f" as {leaf}"
        text = re.sub(
            rf"^(\s*)from {re.escape(old_parent)} import {re.escape(leaf)}\b(?! as)",
            rf"\1from {new_parent} import {new_leaf}{alias}",
            text,
            flags=re.M,
        )
        text = re.sub(
            rf"^(\s*)from {re.escape(old_parent)} import {re.escape(leaf)} as ",
            rf"\1from {new_parent} import {new_leaf} as ",
            text,
            flags=re.M,
        )
        text = re.sub(rf"(?<![\w.]){re.escape(old_name)}(?!\w)", new_name, text)
    return text


def deepen(text: str, delta: int) -> str:
    """`Path(__file__).resolve().parents[n]` of a file moved `delta` folders deeper."""
    if delta == 0:
        return text
    pattern = r"Path\(__file__\)\.resolve\(\)\.parents\[(\d+)\]"
    return re.sub(pattern, lambda m: f"Path(__file__).resolve().parents[{int(m[1]) + delta}]", text)


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True
    ).stdout.split(b"\0")
    files = []
    for name in listed:
        path = REPO / name.decode()
        if not name or not path.is_file() or path.suffix not in TEXT_SUFFIXES:
            continue
        files.append(path)
    return files


TEXT_SUFFIXES = frozenset({".py", ".md", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".txt", ""})


def fix(moves: list[Move], rewrite_only: bool = False) -> None:
    """Apply `moves` with `git mv` (unless `rewrite_only`), create the missing `__init__.py`
    files, then rewrite the references in every tracked text file."""
    moved = {m.source: m.target for m in moves if m.source != m.target}
    renames = {**moved, **{REPO / old: REPO / new for old, new in HELPERS_MOVED.items()}}
    if not rewrite_only:
        for move in moves:
            if move.source == move.target:
                continue
            move.target.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "mv", str(move.source), str(move.target)], cwd=REPO, check=True)
        for init in missing_packages():
            init.touch()
            subprocess.run(["git", "add", str(init)], cwd=REPO, check=True)
    for path in tracked_text_files():
        if path in (Path(__file__).resolve(), UNIT / "test_tests_layout.py"):
            continue  # their tables and examples name the old places on purpose
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        new = rewrite(text, renames)
        # only a file this run moves changes depth: HELPERS_MOVED is history, there for the
        # references a merge brings back, and deepening those helpers again broke their paths
        for old, target in moved.items():
            if target == path and not rewrite_only:
                new = deepen(new, len(target.parts) - len(old.parts))
        if new != text:
            path.write_text(new, encoding="utf-8", errors="surrogateescape")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/place-tests", description=__doc__.split("\n")[0])
    parser.add_argument("--fix", action="store_true", help="git mv and rewrite the references")
    parser.add_argument(
        "--rewrite-only",
        action="store_true",
        help="only rewrite references to moved files (after a merge brought old imports back)",
    )
    args = parser.parse_args(argv)
    moves = misplaced()
    for move in moves:
        print(f"{move.source.relative_to(REPO)} -> {move.target.relative_to(REPO)}  ({move.why})")
    for init in missing_packages():
        print(f"missing {init.relative_to(REPO)}")
    if args.fix or args.rewrite_only:
        fix(moves, rewrite_only=args.rewrite_only)
    return 0 if not moves or args.fix else 1


if __name__ == "__main__":
    sys.exit(main())
