from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

# pytest-xdist's workers start with COLUMNS=80 in their environment (for their own report). rich
# fixes a console's width from COLUMNS when the console is made, at import, so the CLI's consoles
# (cli/search_view.py) would keep 80 whatever a test sets: gone before anything imports them, as
# in a shell that sets no COLUMNS, so each test's own COLUMNS (or none) is what the CLI sees.
os.environ.pop("COLUMNS", None)

import pytest
from _pytest.nodeid import coerce_node_id
from pytest_httpserver import HTTPServer

from fanfuse.net.runner import Runner
from fanfuse.settings import Settings, get_settings
from tests.support.aws_fixtures import aws_env as aws_env
from tests.support.aws_fixtures import aws_settings as aws_settings
from tests.support.aws_fixtures import moto_server as moto_server
from tests.support.loopback import pytest_runtest_setup as pytest_runtest_setup
from tests.support.loopback import pytest_runtest_teardown as pytest_runtest_teardown
from tests.support.platforms.harness import Sleeps, loopback_server, make_runner

if TYPE_CHECKING:
    from _pytest.fixtures import FuncFixtureInfo  # the type of Item._fixtureinfo


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Groups for pytest-xdist's `--dist loadgroup` (scripts/test runs the suite on several
    workers): the tests of a module that share a module- or class-scoped fixture run on one
    worker, so the fixture (a server, a browser, a stack of its own) starts once; every other
    test goes to whichever worker is free. Session fixtures (the emulator stacks, moto) start
    once per worker that needs them. Marks are added before xdist's own hook reads them
    (tryfirst); a test that names its group keeps it."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers:
        items[:] = longest_first(items, workers)


class GroupInNodeId:
    """pytest-xdist's `--dist loadgroup` reads a test's group from its node id (`...@group`),
    which its worker sets as `item._nodeid`; pytest 9.2 keeps the id in `item._id`, so the
    suffix is lost and a group's tests are spread over the workers (each then starting the
    module's fixture again). This puts the suffix where pytest reads it, after xdist's hook
    (trylast), when xdist's own did not take."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if not (os.environ.get("PYTEST_XDIST_WORKER") and config.getvalue("loadgroup")):
            return
        for item in items:
            groups = sorted({str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args})
            if groups and "@" not in item.nodeid.rpartition("]")[2] and hasattr(item, "_id"):
                item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(groups)}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(GroupInNodeId(), "fanfuse-group-in-node-id")


def longest_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The order in which xdist hands out the work units (a group, or a test of no group;
    scripts/test passes `--no-loadscope-reorder` so that this order is the one used): the
    tests marked `long` first, longest first, so that the longest ends no later than the
    rest of the suite; the other units by size, largest first, as xdist would order them.

    Each worker is handed two units at the start and runs them in turn: the `workers` longest
    tests are followed by `workers` single tests (the second unit of each worker), so that no
    long test waits behind another; the other long ones go to whichever worker frees up first.
    """
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        group = item.get_closest_marker("xdist_group")
        units.setdefault(str(group.args[0]) if group else item.nodeid, []).append(item)

    def seconds(unit: list[pytest.Item]) -> float:
        return max(
            (float(m.kwargs.get("seconds", 60)) for i in unit for m in i.iter_markers("long")),
            default=0.0,
        )

    long = sorted((u for u in units.values() if seconds(u)), key=seconds, reverse=True)
    rest = sorted((u for u in units.values() if not seconds(u)), key=len, reverse=True)
    singles = [u for u in reversed(rest) if len(u) == 1][:workers]
    others = [u for u in rest if all(u is not s for s in singles)]
    order = long[:workers] + singles + long[workers:] + others
    return [item for unit in order for item in unit]


def shares_a_module_fixture(item: pytest.Item) -> bool:
    info: FuncFixtureInfo | None = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        defs[-1].scope in ("module", "class", "package") for defs in info.name2fixturedefs.values()
    )


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Index caches go to FANFUSE_CACHE_DIR when CI sets it, else to one temp dir per session,
    which pytest-xdist's workers share (an index is published by an atomic rename, so two
    workers building the same one at once both leave a whole index)."""
    if not os.environ.get("FANFUSE_CACHE_DIR"):
        base = tmp_path_factory.getbasetemp()
        shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
        monkeypatch.setenv("FANFUSE_CACHE_DIR", str(shared / "cache"))


@pytest.fixture(autouse=True)
def _settings_read_afresh() -> Iterator[None]:
    """`get_settings` keeps the process's tree (one per composition root): each test reads its
    own environment, as each process does."""
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(db_path=tmp_path / "fanfuse.db", progress_interval=0.0, deadline_seconds=30)


# The web platform tests (tests/unit/platforms, tests/integration/test_web_*): a 127.0.0.1
# server for the providers' answers and a runner that records its sleeps instead of sleeping.


@pytest.fixture
def server() -> Iterator[HTTPServer]:
    srv = loopback_server()
    yield srv
    srv.clear()
    srv.stop()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def runner(sleeps: Sleeps) -> AsyncIterator[Runner]:
    r = make_runner(sleeps)
    yield r
    await r.aclose()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the library's long modules at the end of every run (tests/unit/test_layers.py:
    a report, never a failure)."""
    from tests.unit.test_layers import LONG_MODULE_LINES, long_modules

    long = long_modules()
    if long:
        terminalreporter.write_sep("-", f"modules over {LONG_MODULE_LINES} lines (one concept?)")
        for name, lines in long.items():
            terminalreporter.write_line(f"{name}: {lines} lines")
