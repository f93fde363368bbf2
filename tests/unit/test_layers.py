"""The floor plan, checked: which package may import which, and how big a module may grow.

Read from the source with `ast` (imports inside functions count too), so a lazy import cannot
hide a dependency that goes the wrong way.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIBRARY = Path(__file__).resolve().parents[2] / "shared" / "fanfuse"
MAX_LINES = 450


def modules(package: str = "") -> list[Path]:
    return sorted((LIBRARY / package).rglob("*.py"))


def imported(path: Path) -> set[str]:
    """Every module name `path` imports, at any depth of the file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def offenders(package: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    found = {}
    for path in modules(package):
        bad = sorted(
            n for n in imported(path) if any(n == f or n.startswith(f + ".") for f in forbidden)
        )
        if bad:
            found[str(path.relative_to(LIBRARY))] = bad
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("platforms", ("fanfuse.content", "fanfuse.stages", "fanfuse.service", "fanfuse.store")),
        ("content", ("fanfuse.platforms", "fanfuse.stages", "fanfuse.service")),
        ("net", ("fanfuse.platforms", "fanfuse.content", "fanfuse.stages", "fanfuse.service")),
        ("stages", ("importlib", "fanfuse.service", "fanfuse.lifecycle")),
        ("rerank", ("fanfuse.platforms", "fanfuse.stages", "fanfuse.service", "fanfuse.store")),
        ("auth", ("fanfuse.service", "fanfuse.cloud", "fanfuse.serve", "fanfuse.platforms")),
        ("agent", ("fanfuse.cli", "fanfuse.cloud", "fanfuse.devstack", "fanfuse.bench")),
        ("aws", ("fanfuse.serve", "fanfuse.cli", "fanfuse.devstack", "starlette", "uvicorn")),
        ("queue", ("fanfuse.service", "fanfuse.cloud", "fanfuse.store", "fanfuse.platforms")),
    ],
)
def test_no_import_goes_up_or_sideways(package: str, forbidden: tuple[str, ...]) -> None:
    assert modules(package), f"no modules under {package}/"
    assert offenders(package, forbidden) == {}


def test_only_the_command_imports_the_mcp_server() -> None:
    """`agent/` sits at the top with cli.py and cloud.py: nothing below may need the MCP SDK."""
    users = {
        str(p.relative_to(LIBRARY))
        for p in modules()
        if "agent" not in p.relative_to(LIBRARY).parts
        and any(n == "fanfuse.agent" or n.startswith("fanfuse.agent.") for n in imported(p))
    }
    assert users == {"cli.py"}


def test_fusion_is_pure() -> None:
    pure = ("fusion.py", "fusers.py", "dedup.py", "urls.py", "aggregate.py", "progress.py")
    pure += ("modes.py", "health.py", "rerank/base.py")
    for name in (*pure, "lifecycle.py"):
        assert not {
            n for n in imported(LIBRARY / name) if n.startswith(("httpx", "fanfuse.net", "asyncio"))
        }, name


def test_no_library_module_is_over_the_limit() -> None:
    sizes = {str(p.relative_to(LIBRARY)): len(p.read_text().splitlines()) for p in modules()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


FRAMEWORKS = ("flask", "functions_framework", "starlette", "uvicorn", "sse_starlette")


def test_the_http_fronts_sit_at_the_top_and_share_only_the_api_module() -> None:
    """cloud.py (Flask) and serve/ (Starlette) share `fanfuse.api`, never each other or each
    other's framework; the API rules stay framework-neutral; only the CLI starts a server."""
    assert (
        offenders("serve", ("fanfuse.cloud", "fanfuse.cli", "flask", "functions_framework")) == {}
    )
    cloud = imported(LIBRARY / "cloud.py")
    assert not {n for n in cloud if n.startswith(("fanfuse.serve", "starlette", "uvicorn", "sse"))}
    for neutral in ("api.py", "openapi.py"):
        assert not {n for n in imported(LIBRARY / neutral) if n.startswith(FRAMEWORKS)}, neutral
    users = {
        str(p.relative_to(LIBRARY))
        for p in modules()
        if "serve" not in p.relative_to(LIBRARY).parts
        and any(n == "fanfuse.serve" or n.startswith("fanfuse.serve.") for n in imported(p))
    }
    assert users <= {"cli.py"}
