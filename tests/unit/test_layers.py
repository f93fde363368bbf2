"""The floor plan, checked: which folder may import which, no import cycle, how big a module grows.

`LAYERS` is the one place the layers are written down (besides docs/DESIGN.md, which explains
them): each folder of `shared/fanfuse` (and `settings.py`) with the folders it may import. A
module belongs to the longest key that names it (`fanfuse.fronts.mcp.tools` is `fronts.mcp`'s,
`fanfuse.fronts.plain_text` is `fronts.plain_text`'s), and may import its own folder and the
folders its
row lists, nothing else. Imports are read from the source with `ast`, at any depth of the file
(inside functions and `if TYPE_CHECKING:` too), relative ones resolved against the module's
package, and dynamic ones too (`importlib.import_module` or `__import__` of a literal; a loader
that imports a name it computes has its table read: every string in it that names a library
module), so no import, lazy, relative or by name, can hide a dependency that goes the wrong way,
nor a cycle. The table itself is a DAG, and the package root (the public API, which reaches the
runtimes) is imported by no module it reaches.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from functools import cache
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[2] / "shared" / "fanfuse"
LONG_MODULE_LINES = 600
"""Past this many lines a module is named in the test report (`long_modules`, printed by
tests/conftest.py's terminal summary) as a prompt to check that it still holds one concept.
Never a failure: a module holds one concept whatever its length (docs/DESIGN.md), and a hard
cap produced splits and trimmed docstrings that did more harm than a long module."""
MAX_ROOT_ENTRIES = 23

_BASE = {"settings", "net.policy", "support", "tracing", "wire"}
"""What any layer above the wire formats may use. Not the package root (`""`): it is the public
API, above the runtimes; the version string is a leaf of its own (`support.version`). `tracing`:
its spans are no-ops until configured."""
LAYERS: dict[str, set[str]] = {
    # the bottom: stdlib-only helpers, the wire formats, the settings (which speak wire's
    # Price and ExtraPlatform)
    "settings": {"net.policy", "support", "wire"},
    # the network policy's defaults (net/policy.py, stdlib only), which the content section
    # of the settings tree starts from
    "net.policy": set(),
    "support": set(),
    "wire": {"support"},
    # spans, and what a queued task carries (tracing/): OpenTelemetry behind a no-op facade
    "tracing": {"settings", "support", "wire"},
    # pure rules
    "fusion": {"wire", "support"},
    "rules": {"fusion", "wire", "support"},
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
    # LlmRerankSettings) and pass them down
    "runtimes": {
        *("service", "platforms", "content", "rerank", "store", "queue", "auth", "net", "rules"),
        *_BASE,
    },
    # http -> queue: a task delivery's body is the queue's message (`http.deliveries` parses it);
    # no new reach, since `service` already imports `queue`
    # http -> store, rules: `GET /stats` reads the store's StatsStore role and computes the
    # figures by rules/stats_figures.py (http.stats_route), which `fanfuse stats` shares; no new
    # reach either
    # http -> runtimes: the client side reaches either runtime through one port
    # (`http.backend`, the one the CLI and the MCP front share): the embedded one in this
    # process, or a stack through the API's client
    "http": {"runtimes", "service", "auth", "queue", "store", "rules", *_BASE},
    # the fronts never import each other, but for their shared text (`render`) and the Flask
    # targets the Lambda serves behind apig_wsgi (`functions`)
    "fronts": set(),
    "fronts.plain_text": {*_BASE},
    "fronts.functions": {"runtimes", "http", "auth", *_BASE},
    "fronts.aws_lambda": {"fronts.functions", "runtimes", "http", "auth", "queue", "net", *_BASE},
    "fronts.serve": {"runtimes", "http", "auth", "platforms", "store", "rules", *_BASE},
    "fronts.mcp": {"fronts.plain_text", "runtimes", "http", "service", "auth", "rules", *_BASE},
    # the command, and the tools only it starts (benchmarks, evaluation, local stacks, stubs)
    "cli": {
        *("fronts.plain_text", "fronts.serve", "fronts.mcp", "tools", "runtimes", "http"),
        *("platforms", "store", "auth", "rules", *_BASE),
    },
    # tools -> content: docs/configuration.md is generated from every settings model
    # (tools/configuration.py), the content stages' among them
    "tools": {
        *("runtimes", "http", "service", "stages", "platforms", "rerank", "retrieval", "store"),
        *("content", "queue", "auth", "rules", "fusion", "net", *_BASE),
    },
    # fanfuse/__init__.py: the public API, loaded lazily, and its `__version__`
    "": {"runtimes", "wire", "support"},
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


def package_of(path: Path) -> str:
    """The package a relative import in `path` starts from: the module's own for an `__init__`,
    else its parent's."""
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def absolute(module: str | None, level: int, package: str) -> str:
    """`from <level dots><module> import ...` in `package`, as an absolute module name
    (`from ..store import sqlite` in fanfuse.fusion: fanfuse.store)."""
    if level == 0:
        return module or ""
    parts = package.split(".")
    if level - 1 >= len(parts):
        raise ImportError(f"a relative import beyond the top-level package in {package}")
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base


DYNAMIC_IMPORTERS = {"import_module", "__import__"}
"""`importlib.import_module(name, package=None)` and `__import__(name)`, however they are
reached (`importlib.import_module`, `from importlib import import_module`)."""


def _call_name(node: ast.Call, aliases: dict[str, str]) -> str | None:
    if isinstance(node.func, ast.Name):
        return aliases.get(node.func.id, node.func.id)
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def dynamic_import(
    node: ast.Call, package: str, aliases: dict[str, str]
) -> tuple[bool, str | None]:
    """(whether `node` imports by name, the absolute name when it is a literal); `aliases`:
    the local names of `from importlib import import_module as ...`."""
    if _call_name(node, aliases) not in DYNAMIC_IMPORTERS or not node.args:
        return False, None
    name = _literal(node.args[0])
    if name is None:
        return True, None
    if name.startswith("."):  # import_module(".x", package): relative to the literal package
        given = node.args[1] if len(node.args) > 1 else None
        given = given or next((k.value for k in node.keywords if k.arg == "package"), None)
        anchor = _literal(given) or package
        dots = len(name) - len(name.lstrip("."))
        return True, absolute(name[dots:] or None, dots, anchor)
    return True, name


def imported(path: Path) -> set[str]:
    """Every name the library module at `path` imports (see `imports_of`)."""
    return imports_of(path.read_text(), package_of(path), str(path))


def imports_of(source: str, package: str, filename: str = "<source>") -> set[str]:
    """Every name `source` (a module of `package`) imports, at any depth of the file (`from a
    import b`: a.b, which is module a.b if there is one, else a name in module a): absolute and
    relative imports, and dynamic ones. A module that imports a name it computes (the public
    API's lazy table, the platform registry) imports every library module a string of its source
    names whole (`"fanfuse.platforms.docs:DocsPlatform"`): its loader's table."""
    tree = ast.parse(source, filename)
    aliases = {
        alias.asname: alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "importlib"
        for alias in node.names
        if alias.asname
    }
    names: set[str] = set()
    computed = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = absolute(node.module, node.level, package)
            names.update(f"{source}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call):
            dynamic, name = dynamic_import(node, package, aliases)
            if name is not None:
                names.add(name)
            computed |= dynamic and name is None
    if computed:
        for node in ast.walk(tree):
            text = _literal(node) if isinstance(node, ast.Constant) else None
            target = text.partition(":")[0] if text else ""
            if target in library():
                names.add(target)
    return names


def _module(name: str) -> str | None:
    """The library module `name` is or is in (`fanfuse.wire.models.Task`: fanfuse.wire.models)."""
    while name and name not in library():
        name = name.rpartition(".")[0]
    return name or None


def library_targets(name: str, names: set[str]) -> frozenset[str]:
    """The library modules among the names module `name` imports (itself left out)."""
    targets = {_module(n) for n in names if n == "fanfuse" or n.startswith("fanfuse.")}
    return frozenset(t for t in targets if t is not None and t != name)


@cache
def graph() -> dict[str, frozenset[str]]:
    """Library module -> the library modules it imports (itself left out)."""
    return {name: library_targets(name, imported(path)) for name, path in library().items()}


def against_the_table(module: str, targets: Iterable[str]) -> list[str]:
    """The modules among `targets` that `module`'s row does not allow it to import."""
    layer = layer_of(module)
    assert layer is not None, module
    return sorted(t for t in targets if layer_of(t) != layer and layer_of(t) not in LAYERS[layer])


def reached(layer: str) -> set[str]:
    """The layers `layer`'s row reaches, directly or through other rows."""
    seen: set[str] = set()
    todo = [layer]
    while todo:
        for below in LAYERS[todo.pop()] - seen:
            seen.add(below)
            todo.append(below)
    return seen


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
        bad = against_the_table(module, targets)
        if bad:
            wrong[module] = bad
    assert wrong == {}


def test_the_table_is_a_dag() -> None:
    """A cycle of rows would let two layers import each other through a third, and the module
    cycle test would see it only once someone wrote the imports."""
    rows = {layer: frozenset(allowed) for layer, allowed in LAYERS.items()}
    assert cycles(rows) == []
    looped = {**rows, "support": frozenset({"rules"})}  # rules -> fusion, wire -> support
    assert cycles(looped) == [["fusion", "rules", "support", "wire"]]


def test_no_module_the_package_root_reaches_imports_it() -> None:
    """The root is the public API: it reaches the runtimes, and through them nearly every layer,
    so a layer below it importing it (for its `__version__`, say) closes a loop."""
    below = reached("")
    assert {"runtimes", "service", "wire", "support"} <= below
    importing = {m for m, targets in graph().items() if "fanfuse" in targets}
    assert {m for m in importing if layer_of(m) in below} == set()
    assert {layer for layer, row in LAYERS.items() if "" in row and layer in below} == set()


def test_the_table_reads_exact_module_names() -> None:
    """`fanfuse.cli_render` is not in `cli`, `fanfuse.services` not in `service`."""
    assert layer_of("fanfuse.cli.search_view") == "cli"
    assert layer_of("fanfuse.cli_render") is None
    assert layer_of("fanfuse.services.x") is None
    assert layer_of("fanfuse.fronts.mcp.tools") == "fronts.mcp"
    assert layer_of("fanfuse.fronts.plain_text") == "fronts.plain_text"


def test_no_module_imports_a_module_that_imports_it_back() -> None:
    assert cycles(dict(graph())) == []


def test_relative_and_dynamic_imports_are_read() -> None:
    """`from ..store import sqlite` in fusion/rerank_contract.py is caught as
    `import fanfuse.store.sqlite` would be, and so are imports by name."""
    rerank = library()["fanfuse.fusion.rerank_contract"]
    planted = rerank.read_text() + "\nfrom ..store import sqlite\n"
    names = imports_of(planted, package_of(rerank))
    assert "fanfuse.store.sqlite" in names
    targets = library_targets("fanfuse.fusion.rerank_contract", names)
    assert against_the_table("fanfuse.fusion.rerank_contract", targets) == ["fanfuse.store.sqlite"]

    assert imports_of("from . import fusers", "fanfuse.fusion") == {"fanfuse.fusion.fusers"}
    assert imports_of("from .. import store", "fanfuse.fusion") == {"fanfuse.store"}
    assert imports_of("from .urls import canonical", "fanfuse.fusion") == {
        "fanfuse.fusion.urls.canonical"
    }
    assert imports_of("from . import docs", "fanfuse.platforms") == {"fanfuse.platforms.docs"}
    assert imports_of("import importlib\nimportlib.import_module('fanfuse.store.sqlite')", "x") == {
        "importlib",
        "fanfuse.store.sqlite",
    }
    assert "fanfuse.queue" in imports_of(
        "from importlib import import_module as im\nim('fanfuse.queue')", "x"
    )
    assert "fanfuse.queue.sqs" in imports_of(
        "import importlib\nimportlib.import_module('.sqs', 'fanfuse.queue')", "x"
    )
    assert "fanfuse.store.firestore" in imports_of("__import__('fanfuse.store.firestore')", "x")
    # A name it computes: the strings of its table are its imports.
    table = "import importlib\nT = {'a': 'fanfuse.store.sqlite:SqliteStore'}\n"
    assert "fanfuse.store.sqlite" in imports_of(table + "importlib.import_module(T['a'])", "x")
    assert "fanfuse.store.sqlite" not in imports_of(table, "x")


def test_the_registry_and_the_public_api_import_what_their_tables_name() -> None:
    assert "fanfuse.platforms.docs" in graph()["fanfuse.platforms"]
    assert "fanfuse.runtimes.embedded" in graph()["fanfuse"]


def test_the_cycle_finder_finds_a_cycle_through_three_modules() -> None:
    edges = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset()}
    assert cycles(edges) == [["a", "b", "c"]]


# ---------------------------------------------------------------------------------------------
# What the table alone cannot say


def test_package_inits_import_nothing() -> None:
    """No re-exports: importing `fanfuse.x.y` costs `y` and nothing else. Three inits hold
    code of their own: the lazy public API, the platform registry, the retrieval index base, the
    settings tree's root (which every `from fanfuse.settings import Settings` names)."""
    holding_code = {"fanfuse", "fanfuse.platforms", "fanfuse.retrieval", "fanfuse.settings"}
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
    assert "fanfuse.rules.lifecycle" in pure and "fanfuse.fusion.rerank_contract" in pure
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


ENVIRONMENT_READERS = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}
"""`os`'s doors to the process environment, however reached (`os.environ`, `from os import
getenv`, `import os as o`)."""
READS_THE_ENVIRONMENT = {"settings"}
"""The settings package: the one place that reads (or writes) the environment; every other
module is given the settings tree (docs/configuration.md)."""


def environment_reads(source: str, filename: str = "<source>") -> list[str]:
    """`line: what` for each way `source` reaches the process environment: a name `os` gives
    for it, `os.<name>`, and a command-line option's `envvar=` (typer's and click's read it
    behind the command's back)."""
    tree = ast.parse(source, filename)
    modules = {"os"} | {
        alias.asname
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "os" and alias.asname
    }
    imported_names = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "os"
        for alias in node.names
        if alias.name in ENVIRONMENT_READERS
    }
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ENVIRONMENT_READERS
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [f"{node.lineno}: from os import {n}" for n in sorted(imported_names)]
        elif isinstance(node, ast.Name) and node.id in imported_names:
            found.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.Call):
            found += [f"{node.lineno}: envvar=" for k in node.keywords if k.arg == "envvar"]
    return sorted(set(found), key=lambda entry: int(entry.partition(":")[0]))


def test_only_the_settings_package_reads_the_environment() -> None:
    """A module that read a variable itself would ignore the tree its root was given (a test's
    settings, the dotenv file, a front's overrides), and `fanfuse config` could not show it.
    The development tools (`fanfuse.tools`: benchmarks, local stacks) set up the environment
    of the processes they start, which is theirs to write."""
    readers = {}
    for module, path in library().items():
        if any(in_layer(module, layer) for layer in (*READS_THE_ENVIRONMENT, "tools")):
            continue
        found = environment_reads(path.read_text(), str(path))
        if found:
            readers[module] = found
    assert readers == {}


def test_the_environment_check_catches_every_way_in() -> None:
    """A read planted in a library module is caught, however it is spelled; a mapping that
    merely happens to be called `environ` (a WSGI request's, a parameter) is not a read."""
    rerank = library()["fanfuse.fusion.rerank_contract"]
    planted = rerank.read_text() + "\nimport os\nTOKEN = os.environ.get('FANFUSE_X')\n"
    assert environment_reads(planted)[-1].endswith(": os.environ")
    assert environment_reads("import os\nos.getenv('X')") == ["2: os.getenv"]
    assert environment_reads("import os as o\no.environ['X']") == ["2: o.environ"]
    assert environment_reads("from os import environ\nenviron.get('X')") == [
        "1: from os import environ",
        "2: environ",
    ]
    assert environment_reads("from os import getenv as g\ng('X')") == [
        "1: from os import g",
        "2: g",
    ]
    option = "typer.Option('--key', envvar='FANFUSE_API_KEY')"
    assert environment_reads(f"import typer\nKEY = {option}") == ["2: envvar="]
    assert environment_reads("def f(request):\n    return request.environ.get('X')") == []
    assert environment_reads("def f(environ):\n    return environ.get('X')") == []


def long_modules() -> dict[str, int]:
    """The library modules past LONG_MODULE_LINES, longest first."""
    sizes = {m: len(p.read_text().splitlines()) for m, p in library().items()}
    long = {name: n for name, n in sizes.items() if n > LONG_MODULE_LINES}
    return dict(sorted(long.items(), key=lambda item: -item[1]))
