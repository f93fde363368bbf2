"""The floor plan, checked: which folder may import which, no import cycle, how big a module grows.

`LAYERS` is the one place the layers are written down (besides docs/DESIGN.md, which explains
them): each folder of `shared/fanfuse` (and `settings.py`) with the folders it may import. A
module belongs to the longest key that names it (`fanfuse.fronts.mcp.tools` is `fronts.mcp`'s,
`fanfuse.fronts.render` is `fronts.render`'s), and may import its own folder and the folders its
row lists, nothing else. Imports are read from the source with `ast`, at any depth of the file
(inside functions and `if TYPE_CHECKING:` too), so a lazy import cannot hide a dependency that
goes the wrong way, nor a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from functools import cache
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[2] / "shared" / "fanfuse"
MAX_LINES = 450
MAX_ROOT_ENTRIES = 22

_BASE = {"settings", "support", "wire", ""}
"""What any layer above the wire formats may use; `""` is the package root, for its `__version__`
(its own imports, the public API, are lazy)."""
LAYERS: dict[str, set[str]] = {
    # the bottom: stdlib-only helpers, the settings, the wire formats
    "settings": set(),
    "support": set(),
    "wire": {"support"},
    # pure rules
    "fusion": {"wire", "support", ""},
    "rules": {"fusion", "wire", "support", ""},
    # I/O and per-result work: none of them knows a store, a queue or the service
    "net": {*_BASE},
    "retrieval": {*_BASE},
    "platforms": {"net", "retrieval", "rules", "fusion", *_BASE},
    "content": {"net", "fusion", *_BASE},
    "rerank": {"net", "retrieval", "fusion", *_BASE},
    # the ports and their adapters
    "store": {"net", "rules", "fusion", *_BASE},
    "auth": {"store", *_BASE},
    "queue": {"auth", "net", *_BASE},
    # one search's run, then the service over the ports (no framework)
    "stages": {"platforms", "content", "store", "net", "rules", "fusion", *_BASE},
    "service": {
        *("stages", "platforms", "content", "rerank", "retrieval", "store", "queue", "auth"),
        *("net", "rules", "fusion", *_BASE),
    },
    # the composition roots, then what the HTTP fronts share (framework-free)
    # runtimes -> content, rerank: the roots build those settings (ContentSettings,
    # LlmRerankSettings) and pass them down; runtimes -> http: the remote runtime is reached
    # through its API's client (`runtimes.backend`, the one port the CLI and the MCP front share)
    "runtimes": {
        *("service", "platforms", "content", "rerank", "store", "queue", "auth", "net", "rules"),
        *("http", *_BASE),
    },
    # http -> queue: a task delivery's body is the queue's message (`http.deliveries` parses it);
    # no new reach, since `service` already imports `queue`
    # http -> store, rules: `GET /stats` reads the store's StatsStore role and computes the
    # figures by rules/stats.py (http.stats), which `fanfuse stats` shares; no new reach either
    "http": {"service", "auth", "queue", "store", "rules", *_BASE},
    # the fronts never import each other, but for their shared text (`render`) and the Flask
    # targets the Lambda serves behind apig_wsgi (`functions`)
    "fronts": set(),
    "fronts.render": {*_BASE},
    "fronts.functions": {"runtimes", "http", "auth", *_BASE},
    "fronts.aws_lambda": {"fronts.functions", "runtimes", "http", "auth", "queue", "net", *_BASE},
    "fronts.serve": {"runtimes", "http", "auth", "platforms", "store", "rules", *_BASE},
    "fronts.mcp": {"fronts.render", "runtimes", "http", "service", "auth", "rules", *_BASE},
    # the command, and the tools only it starts (benchmarks, evaluation, local stacks, stubs)
    "cli": {
        *("fronts.render", "fronts.serve", "fronts.mcp", "tools", "runtimes", "http"),
        *("platforms", "store", "auth", "rules", *_BASE),
    },
    # tools -> content: docs/configuration.md is generated from every settings model
    # (tools/configuration.py), the content stages' among them
    "tools": {
        *("runtimes", "http", "service", "stages", "platforms", "rerank", "retrieval", "store"),
        *("content", "queue", "auth", "rules", "fusion", "net", *_BASE),
    },
    # fanfuse/__init__.py: the public API, loaded lazily
    "": {"runtimes", "wire"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(LIBRARY.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def library() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(LIBRARY.rglob("*.py"))}


def layer_of(module: str) -> str | None:
    """The longest key of LAYERS that names `module` (`fanfuse.<key>` or below it)."""
    if module == "fanfuse":
        return ""
    keys = [
        k for k in LAYERS if k and (module == f"fanfuse.{k}" or module.startswith(f"fanfuse.{k}."))
    ]
    return max(keys, key=len) if keys else None


def in_layer(module: str, layer: str) -> bool:
    return module == f"fanfuse.{layer}" or module.startswith(f"fanfuse.{layer}.")


def imported(path: Path) -> set[str]:
    """Every name `path` imports, at any depth of the file (`from a import b`: a.b, which is
    module a.b if there is one, else a name in module a)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _module(name: str) -> str | None:
    """The library module `name` is or is in (`fanfuse.wire.models.Task`: fanfuse.wire.models)."""
    while name and name not in library():
        name = name.rpartition(".")[0]
    return name or None


@cache
def graph() -> dict[str, frozenset[str]]:
    """Library module -> the library modules it imports (itself left out)."""
    edges = {}
    for name, path in library().items():
        targets = {_module(n) for n in imported(path) if n == "fanfuse" or n.startswith("fanfuse.")}
        edges[name] = frozenset(t for t in targets if t is not None and t != name)
    return edges


def cycles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def importers(prefixes: Iterable[str]) -> set[str]:
    """The library modules outside `prefixes` that import a module inside one of them."""
    wanted = tuple(prefixes)

    def inside(m: str) -> bool:
        return any(in_layer(m, p) for p in wanted)

    return {m for m, targets in graph().items() if not inside(m) and any(map(inside, targets))}


# ---------------------------------------------------------------------------------------------
# The table


def test_the_table_names_only_its_own_layers() -> None:
    for layer, allowed in LAYERS.items():
        assert allowed <= set(LAYERS) - {layer}, layer


def test_every_module_belongs_to_a_layer() -> None:
    """A new folder is a new row of the table, not a module no rule applies to."""
    assert {m for m in library() if layer_of(m) is None} == set()


def test_imports_follow_the_table() -> None:
    wrong = {}
    for module, targets in graph().items():
        layer = layer_of(module)
        assert layer is not None
        bad = sorted(
            t for t in targets if layer_of(t) != layer and layer_of(t) not in LAYERS[layer]
        )
        if bad:
            wrong[module] = bad
    assert wrong == {}


def test_the_table_reads_exact_module_names() -> None:
    """`fanfuse.cli_render` is not in `cli`, `fanfuse.services` not in `service`."""
    assert layer_of("fanfuse.cli.render") == "cli"
    assert layer_of("fanfuse.cli_render") is None
    assert layer_of("fanfuse.services.x") is None
    assert layer_of("fanfuse.fronts.mcp.tools") == "fronts.mcp"
    assert layer_of("fanfuse.fronts.render") == "fronts.render"


def test_no_module_imports_a_module_that_imports_it_back() -> None:
    assert cycles(dict(graph())) == []


def test_the_cycle_finder_finds_a_cycle_through_three_modules() -> None:
    edges = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset()}
    assert cycles(edges) == [["a", "b", "c"]]


# ---------------------------------------------------------------------------------------------
# What the table alone cannot say


def test_package_inits_import_nothing() -> None:
    """No re-exports: importing `fanfuse.x.y` costs `y` and nothing else. Three inits hold
    code of their own: the lazy public API, the platform registry, the retrieval index base."""
    holding_code = {"fanfuse", "fanfuse.platforms", "fanfuse.retrieval"}
    importing = {
        m
        for m, p in library().items()
        if p.name == "__init__.py"
        and any(
            isinstance(n, ast.Import | ast.ImportFrom) for n in ast.walk(ast.parse(p.read_text()))
        )
    }
    assert importing <= holding_code


def test_the_package_root_stays_small() -> None:
    entries = [p for p in LIBRARY.iterdir() if p.name != "__pycache__"]
    assert len(entries) <= MAX_ROOT_ENTRIES, sorted(p.name for p in entries)


def test_only_the_command_imports_the_mcp_and_serve_fronts() -> None:
    """`fanfuse mcp` and `fanfuse serve` are started by the CLI: nothing else needs the MCP SDK
    or a resident server."""
    assert importers(["fronts.mcp"]) == {"fanfuse.cli.main"}
    assert importers(["fronts.serve"]) <= {"fanfuse.cli.main"}


def test_fusion_and_the_rules_are_pure() -> None:
    pure = [m for m in library() if in_layer(m, "fusion") or in_layer(m, "rules")]
    assert "fanfuse.rules.lifecycle" in pure and "fanfuse.fusion.rerank" in pure
    for module in [*pure, "fanfuse.wire.modes"]:
        found = imported(library()[module])
        assert not {n for n in found if n.startswith(("httpx", "fanfuse.net", "asyncio"))}, module


def test_stages_neither_load_modules_by_name_nor_decide_the_lifecycle() -> None:
    """The registry loads platforms; the service runs the lifecycle's decisions."""
    for module in (m for m in library() if in_layer(m, "stages")):
        found = imported(library()[module])
        assert not {
            n for n in found if n.split(".")[0] == "importlib" or in_layer(n, "rules.lifecycle")
        }, module


FRAMEWORKS = ("flask", "functions_framework", "starlette", "uvicorn", "sse_starlette")


def test_each_web_framework_stays_in_its_front() -> None:
    """The Flask targets (functions, and the Lambda behind apig_wsgi) and `fanfuse serve`
    (Starlette) share `fanfuse.http`, never each other's framework; `http/` has none."""

    def frameworks(prefix: str, names: tuple[str, ...]) -> set[str]:
        found = set()
        for module in (m for m in library() if in_layer(m, prefix)):
            found |= {n for n in imported(library()[module]) if n.split(".")[0] in names}
        return found

    assert frameworks("fronts.serve", ("flask", "functions_framework")) == set()
    for flask_front in ("fronts.functions", "fronts.aws_lambda"):
        assert frameworks(flask_front, ("starlette", "uvicorn", "sse_starlette")) == set()
    assert frameworks("http", FRAMEWORKS) == set()


def test_no_library_module_is_over_the_limit() -> None:
    sizes = {m: len(p.read_text().splitlines()) for m, p in library().items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
