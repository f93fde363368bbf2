"""Who finishes an embedded search: Ctrl-C, a killed process, a restart (issue 11, item 6).

Real child processes on 127.0.0.1: `fanfuse search` and `fanfuse serve`, on one SQLite file, with
one stub SearXNG platform (`web_gate`) that answers only once the test releases its gate. The
stub counts the provider calls, so "nothing was sent again" is a count that did not move.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from fanfuse.auth import keys
from fanfuse.tools.devstack.processes import ManagedProcess, wait_until
from fanfuse.tools.devstack.serve_process import ServeProcess
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.models import utcnow
from tests.support.option_scenarios import web_platforms

GATE = "hold"
WAIT_S = 30.0
"""The bound on every wait for a child process to reach a state."""

CLI = [sys.executable, "-m", "fanfuse.cli.main", "search"]


@pytest.fixture
def stub() -> Iterator[StubSearxServer]:
    with StubSearxServer() as server:
        yield server


@pytest.fixture
def env(tmp_path: Path, stub: StubSearxServer) -> dict[str, str]:
    """Only the variables set here: no provider keys or platforms of the machine leak in."""
    corpus = tmp_path / "lab.trec"
    corpus.write_text("<DOC>\n<DOCNO>D1</DOCNO>\n<TEXT>laser light</TEXT>\n</DOC>\n")
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
    return {
        **inherited,
        "FANFUSE_CACHE_DIR": str(tmp_path / "cache"),
        "FANFUSE_DB_PATH": str(tmp_path / "state" / "fanfuse.db"),
        "FANFUSE_DOCS_CORPUS": str(corpus),
        "FANFUSE_VECTORS_CORPUS": str(corpus),
        "FANFUSE_DEADLINE_SECONDS": "20",
        "FANFUSE_EXTRA_PLATFORMS": json.dumps(web_platforms(stub, {"web_gate": f"gate/{GATE}"})),
    }


def cli(env: dict[str, str], tmp: Path, *args: str) -> ManagedProcess:
    process = ManagedProcess("cli", [*CLI, *args], env=env, log_path=tmp / "cli.log")
    process.start()
    return process


def serve(env: dict[str, str], tmp: Path, run: str = "first") -> ServeProcess:
    """Not started yet: `with serve(...)` starts it and stops it, `.start()` only starts it.
    Each `run` logs to its own file: a restart must not find its predecessor's `ready` line."""
    return ServeProcess("--warm", "none", env=env, log_dir=tmp / run)


def tasks(env: dict[str, str]) -> dict[str, dict[str, str]]:
    """task id -> its stored document, read straight from the SQLite file."""
    with sqlite3.connect(env["FANFUSE_DB_PATH"]) as db:
        rows = db.execute("SELECT task_id, doc FROM tasks").fetchall()
    return {task_id: json.loads(doc) for task_id, doc in rows}


def run_states(env: dict[str, str], task_id: str) -> list[str]:
    with sqlite3.connect(env["FANFUSE_DB_PATH"]) as db:
        rows = db.execute("SELECT doc FROM platforms WHERE task_id = ?", (task_id,)).fetchall()
    return [json.loads(doc)["state"] for (doc,) in rows]


def only_task(env: dict[str, str]) -> tuple[str, dict[str, str]]:
    (item,) = tasks(env).items()
    return item


def interrupt(process: ManagedProcess) -> None:
    """SIGINT, what Ctrl-C sends, then wait (bounded) for the process to exit."""
    os.kill(process.pid, signal.SIGINT)
    wait_until(lambda: not process.running(), WAIT_S, "the interrupted search's exit")


def kill(process: ManagedProcess) -> None:
    """SIGKILL: no cleanup, no cancel, as a crash or an OOM kill leaves it."""
    os.killpg(process.pid, signal.SIGKILL)
    process.stop()


def started_in_serve(server: ServeProcess, **body: object) -> str:
    headers = {keys.API_KEY_HEADER: server.api_key}
    payload = {"query": "laser", "platform": "web_gate", **body}
    response = httpx.post(f"{server.url}/start_search", json=payload, headers=headers)
    assert response.status_code == 202, response.text
    task_id: str = response.json()["task_id"]
    return task_id


def provider_reached(stub: StubSearxServer, calls: int, process: ManagedProcess) -> None:
    wait_until(lambda: stub.waiting(GATE) >= calls, WAIT_S, "the provider call", process=process)


def cli_searching(stub: StubSearxServer, env: dict[str, str], tmp: Path) -> ManagedProcess:
    """`fanfuse search` (embedded) with its one provider call under way."""
    process = cli(env, tmp, "laser", "-p", "web_gate", "--json")
    provider_reached(stub, 1, process)
    return process


def assert_no_second_call(stub: StubSearxServer) -> None:
    time.sleep(0.5)  # time enough for a wrongly enqueued run to reach the stub
    assert stub.waiting(GATE) == 1


def test_ctrl_c_cancels_the_embedded_search_and_exits_130(
    stub: StubSearxServer, env: dict[str, str], tmp_path: Path
) -> None:
    process = cli_searching(stub, env, tmp_path)
    interrupt(process)
    assert process.returncode == 130, process.log_tail()
    assert "interrupted: the search was cancelled" in process.log_tail()
    task_id, task = only_task(env)
    assert task["status"] == "cancelled" and task["finalized_at"] is not None
    assert run_states(env, task_id) == ["cancelled"]


def test_ctrl_c_over_http_cancels_the_remote_search(
    stub: StubSearxServer, env: dict[str, str], tmp_path: Path
) -> None:
    with serve(env, tmp_path) as server:
        endpoint = f"{server.url}/start_search"
        process = cli(env, tmp_path, "laser", "-p", "web_gate", "--endpoint", endpoint,
                      "--api-key", server.api_key)  # fmt: skip
        provider_reached(stub, 1, process)
        interrupt(process)
        assert process.returncode == 130, process.log_tail()
        task_id, task = only_task(env)  # the server's store: the CLI opened none
        assert task["status"] == "cancelled"
        assert run_states(env, task_id) == ["cancelled"]


def test_a_restarted_serve_resumes_its_own_search_and_a_cli_leaves_it_alone(
    stub: StubSearxServer, env: dict[str, str], tmp_path: Path
) -> None:
    first = serve(env, tmp_path).start()
    task_id = started_in_serve(first)
    provider_reached(stub, 1, first.process)
    kill(first.process)

    done = subprocess.run(
        [*CLI, "laser", "-p", "docs", "--json"], env=env, capture_output=True, timeout=WAIT_S
    )
    assert done.returncode == 0, done.stderr
    assert stub.waiting(GATE) == 1  # the CLI sent nothing for the orphan
    assert tasks(env)[task_id]["status"] in ("pending", "running")

    with serve(env, tmp_path, "second") as second:
        provider_reached(stub, 2, second.process)  # resumed: its one platform asked again
        stub.release(GATE)
        wait_until(lambda: tasks(env)[task_id]["status"] == "completed", WAIT_S, "completion")
    assert run_states(env, task_id) == ["succeeded"]


def test_a_restarted_serve_finalizes_its_search_past_the_deadline_without_a_provider_call(
    stub: StubSearxServer, env: dict[str, str], tmp_path: Path
) -> None:
    first = serve(env, tmp_path).start()
    # Room for a fresh serve's first search to reach the provider on a busy machine: with 1 s
    # its run timed out before the call, and the provider was never reached.
    task_id = started_in_serve(first, timeout_s=6)
    provider_reached(stub, 1, first.process)
    kill(first.process)
    deadline = datetime.fromisoformat(tasks(env)[task_id]["deadline_at"])
    wait_until(lambda: utcnow() > deadline, WAIT_S, "the deadline")

    with serve(env, tmp_path, "second"):
        task = tasks(env)[task_id]  # finalized on start-up, before `ready`
        assert task["status"] == "failed" and task["finalized_at"] is not None
        assert run_states(env, task_id) == ["timed_out"]
        assert_no_second_call(stub)


def test_a_serve_never_resumes_a_search_a_killed_cli_started(
    stub: StubSearxServer, env: dict[str, str], tmp_path: Path
) -> None:
    process = cli_searching(stub, env, tmp_path)
    kill(process)
    task_id, _ = only_task(env)

    with serve(env, tmp_path):
        assert_no_second_call(stub)
        assert tasks(env)[task_id]["status"] in ("pending", "running")
