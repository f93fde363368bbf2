"""`fanfuse trace TASK_ID --endpoint URL`: the timeline read from a deployed API's search_status
(here `fanfuse serve` on 127.0.0.1), with the key other commands send (`--api-key`,
FANFUSE_API_KEY), not from the store; every URL form `--endpoint` takes, and the refusals."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fanfuse.cli.main import app
from fanfuse.http.client import HttpSearchClient
from fanfuse.tools.devstack.serve_process import ServeProcess
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.models import TaskView
from tests.integration.test_page import serve_env
from tests.integration.test_page import stub as stub


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, stub: StubSearxServer
) -> Iterator[ServeProcess]:
    """`fanfuse serve` with docs and test_page.py's stub platforms (web_ok answers in 0.2 s)."""
    tmp = tmp_path_factory.mktemp("trace-serve")
    with ServeProcess("--warm", "none", env=serve_env(tmp, stub), log_dir=tmp / "logs") as process:
        yield process


@pytest.fixture(scope="module")
def searched(server: ServeProcess) -> TaskView:
    client = HttpSearchClient(server.url, api_key=server.api_key, poll=0.05)
    view = asyncio.run(client.search({"query": "laser", "platform": "docs, web_ok"}))
    assert view.status.value == "completed"
    return view


def trace(
    *args: str, key: str | None = None, elsewhere: Path | None = None
) -> tuple[int, str, str]:
    """`fanfuse trace ARGS`; `elsewhere`: a local store that does not hold the search (so what
    is printed can only have come from the endpoint)."""
    env = {"COLUMNS": "200", "FANFUSE_API_KEY": key or ""}
    if elsewhere is not None:
        env["FANFUSE_DB_PATH"] = str(elsewhere / "empty.db")
    result = CliRunner().invoke(app, ["trace", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_the_json_is_the_apis_timeline_whichever_url_names_the_deployment(
    server: ServeProcess, searched: TaskView, tmp_path: Path
) -> None:
    expected = searched.timeline.model_dump(mode="json")
    assert {r["platform"] for r in expected["runs"]} == {"docs", "web_ok"}
    for endpoint in (
        server.url,
        f"{server.url}/",
        f"{server.url}/start_search",
        f"{server.url}/search_status",
    ):
        code, out, err = trace(
            searched.task_id, "--json", "--endpoint", endpoint, key=server.api_key,
            elsewhere=tmp_path,
        )  # fmt: skip
        assert code == 0, (endpoint, err)
        body = json.loads(out)
        assert body["task_id"] == searched.task_id and body["status"] == "completed"
        assert body["timeline"] == expected, endpoint
    # Locally, with no endpoint, the search is not there: the answer above came from the API.
    code, _, err = trace(searched.task_id, "--sqlite", elsewhere=tmp_path)
    assert code == 2 and "no search" in err


def test_the_table_from_the_endpoint_with_the_key_given_as_an_option(
    server: ServeProcess, searched: TaskView, tmp_path: Path
) -> None:
    code, out, err = trace(
        searched.task_id, "--endpoint", server.url, "--api-key", server.api_key,
        elsewhere=tmp_path,
    )  # fmt: skip
    assert code == 0, err
    assert err.strip() == server.url  # where it was read (on stderr, the table on stdout)
    rows = [line for line in out.splitlines() if line.count("│") > 5]
    assert {cells.split("│")[1].strip() for cells in rows} == {"docs", "web_ok"}
    kept = searched.timeline
    assert kept.finalized is not None
    assert f"finalized at {kept.finalized:.3f}s by {kept.finalized_by}" in out


def test_no_key_an_unknown_search_and_no_server_are_said_plainly(
    server: ServeProcess, searched: TaskView, tmp_path: Path
) -> None:
    code, _, err = trace(searched.task_id, "--endpoint", server.url)
    assert code == 2 and "--api-key" in err and "401" not in err.split("error:")[0]
    code, _, err = trace("0" * 32, "--endpoint", server.url, key=server.api_key)
    assert code == 2 and f"no search {'0' * 32} at {server.url}" in err
    code, _, err = trace("x", "--endpoint", "http://127.0.0.1:9", key="k")
    assert code == 1 and "cannot reach http://127.0.0.1:9" in err
