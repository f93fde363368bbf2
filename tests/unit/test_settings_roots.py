"""One config flow: the composition roots read every settings object and pass it down.

Below the roots, a module that built its own `ContentSettings()` (or any of our `*Settings`)
would read the environment behind its caller's back: per run instead of once per runtime, and
past whatever the caller was given (a test's settings, a front's overrides). This walks every
module of the library and fails on a call that builds one of our settings classes, or reads a
platform's (`load_settings`), outside the roots listed here with why each may.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fanfuse.settings import Settings

LIBRARY = Path(__file__).resolve().parents[2] / "shared" / "fanfuse"

ROOTS: dict[str, str] = {
    "fanfuse.settings": "the tree itself: `get_settings`, the cached accessor the roots take, "
    "and the sections and platforms' settings the root reads",
    "fanfuse.runtimes": "the composition roots: embedded and cloud (GCP, AWS) build the "
    "service and every settings object it runs on",
    "fanfuse.fronts.serve.server": "`fanfuse serve`'s entry point: its settings, then the "
    "embedded runtime over them",
    "fanfuse.fronts.mcp.transports": "`fanfuse mcp`'s entry point: its settings, then its runtime",
    "fanfuse.cli": "the command: each subcommand is an entry point and reads its settings once",
    "fanfuse.tools": "benchmarks, evaluation and local stacks: each builds its own runtime on "
    "settings of its own",
    "fanfuse.platforms.contract": "`Platform.load_settings` itself, and `Platform.settings`, which "
    "reads it once per instance (an instance belongs to one runtime's registry)",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(LIBRARY.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_root(module: str) -> bool:
    return any(module == root or module.startswith(f"{root}.") for root in ROOTS)


def settings_classes() -> set[str]:
    """Our settings classes: every class defined in the library whose name ends in
    `Settings` (a third party's, like the MCP SDK's `TransportSecuritySettings`, reads no
    environment of ours and is not one)."""
    names: set[str] = set()
    for path in LIBRARY.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Settings"):
                names.add(node.name)
    return names


def called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def constructions(source: str, filename: str, classes: set[str]) -> list[str]:
    """`line: name(` for each call that builds one of `classes` or loads a platform's."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Call):
            name = called_name(node)
            if name is not None and (name in classes or name == "load_settings"):
                found.append(f"{node.lineno}: {name}(")
    return found


def test_settings_are_built_only_at_the_roots() -> None:
    classes = settings_classes()
    assert {"Settings", "ContentSettings", "LlmRerankSettings", "PlatformSettings"} <= classes
    leaks = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        module = module_name(path)
        if is_root(module):
            continue
        found = constructions(path.read_text(), str(path), classes)
        if found:
            leaks[module] = found
    assert not leaks, f"settings built below the composition roots: {leaks}"


def test_every_root_exists() -> None:
    """A root renamed away would leave its entry allowing nothing, or a new module's name."""
    for root in ROOTS:
        path = LIBRARY.parent.joinpath(*root.split("."))
        assert path.is_dir() or path.with_suffix(".py").is_file(), root


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("x = ContentSettings()", ["1: ContentSettings("]),
        ("x = llm.LlmRerankSettings(base_url='u')", ["1: LlmRerankSettings("]),
        ("def f(p):\n    return p.load_settings()", ["2: load_settings("]),
        ("x = ContentSettings.model_construct()", []),  # the defaults, no environment read
        ("x = TransportSecuritySettings()", []),  # not ours
        ("x: ContentSettings | None = None", []),  # a type is no construction
    ],
)
def test_what_counts_as_building_settings(source: str, expected: list[str]) -> None:
    classes = {"ContentSettings", "LlmRerankSettings"}
    assert constructions(source, "<test>", classes) == expected


def test_the_write_log_reads_its_old_name_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """`store_write_log` was `firestore_write_log`: a deployment that sets the old variable
    keeps its log, the new name wins when both are set, and code sets it by its name."""
    monkeypatch.delenv("FANFUSE_STORE_WRITE_LOG", raising=False)
    monkeypatch.setenv("FANFUSE_FIRESTORE_WRITE_LOG", "/tmp/old.jsonl")
    assert Settings().store_write_log == Path("/tmp/old.jsonl")
    monkeypatch.setenv("FANFUSE_STORE_WRITE_LOG", "/tmp/new.jsonl")
    assert Settings().store_write_log == Path("/tmp/new.jsonl")
    assert Settings(store_write_log=Path("/tmp/given.jsonl")).store_write_log == Path(
        "/tmp/given.jsonl"
    )
