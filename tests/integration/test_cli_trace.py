"""`fanfuse trace TASK_ID` on a search the embedded runtime ran: the timeline as a table and as
JSON, the slowest platform's end and the finalization after it; and the MCP digest's timeline."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fanfuse.cli.main import app
from fanfuse.fronts.mcp.digest import digest
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.tools.stubs import StubSearxServer, stub_platforms
from fanfuse.wire.models import TaskView

DELAYS = (0.0, 0.2)


@pytest.fixture
def searched(tmp_path: Path) -> Iterator[tuple[Path, TaskView]]:
    db = tmp_path / "trace.db"
    with StubSearxServer() as stub:
        platforms = stub_platforms(stub, DELAYS)
        settings = Settings(db_path=db, extra_platforms=platforms)

        async def run() -> TaskView:
            async with EmbeddedRuntime(settings) as runtime:
                return await runtime.search("lasers", platform=sorted(platforms), cache="bypass")

        yield db, asyncio.run(run())


def trace(db: Path, *args: str) -> tuple[int, str, str]:
    env = {"FANFUSE_DB_PATH": str(db), "COLUMNS": "200"}
    result = CliRunner().invoke(app, ["trace", "--sqlite", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_the_json_is_the_documents_timeline(searched: tuple[Path, TaskView]) -> None:
    db, view = searched
    code, out, err = trace(db, view.task_id, "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body["task_id"] == view.task_id and body["status"] == "completed"
    kept = body["timeline"]
    assert kept == view.timeline.model_dump(mode="json")
    slow = next(r for r in kept["runs"] if r["platform"] == "stub_0_2")
    assert slow["queued"] <= slow["started"] <= slow["working"] <= slow["first_result"]
    assert slow["first_result"] <= slow["finished"] <= kept["fan_in"] <= kept["finalized"]
    assert slow["stages"]["searching"] >= 0.2  # the stub's delay
    assert kept["finalized_by"] == "aggregate"


def test_the_table_has_a_row_a_platform_and_the_search_s_moments(
    searched: tuple[Path, TaskView],
) -> None:
    db, view = searched
    code, out, err = trace(db, view.task_id)
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.count("│") > 5]
    assert {cells.split("│")[1].strip() for cells in rows} >= {"stub_0", "stub_0_2"}
    assert "finalized at" in out and "past the slowest platform" in out
    assert "searching" in out


def test_an_unknown_search_is_an_error(tmp_path: Path) -> None:
    code, _, err = trace(tmp_path / "empty.db", "0" * 32)
    assert code == 2 and "no search" in err


def test_the_mcp_digest_carries_the_timeline(searched: tuple[Path, TaskView]) -> None:
    _, view = searched
    assert digest(view).timeline == view.timeline
