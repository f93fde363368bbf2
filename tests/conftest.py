from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from fanfuse.net.runner import Runner
from fanfuse.settings import Settings, get_settings
from tests.aws_fixtures import aws_env as aws_env
from tests.aws_fixtures import aws_settings as aws_settings
from tests.aws_fixtures import moto_server as moto_server
from tests.loopback import pytest_runtest_setup as pytest_runtest_setup
from tests.loopback import pytest_runtest_teardown as pytest_runtest_teardown
from tests.unit.platforms.harness import Sleeps, loopback_server, make_runner


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Index caches go to FANFUSE_CACHE_DIR when CI sets it, else to one temp dir per session."""
    if not os.environ.get("FANFUSE_CACHE_DIR"):
        monkeypatch.setenv("FANFUSE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


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
