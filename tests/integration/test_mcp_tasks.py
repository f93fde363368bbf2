"""MCP Tasks (SEP-2663) on `fanfuse mcp`, driven by the official TypeScript requester.

`tests/mcp_tasks_client/run.mjs` uses `@modelcontextprotocol/ext-tasks` (with the SDK client
it needs, both pinned in its package-lock.json; scripts/test installs them) against a
`fanfuse mcp` child on stdio or streamable HTTP, with the embedded runtime on a SQLite file in
tmp_path and searxng platforms on a stub server in this process: `held` answers only when the
test releases its gate, so a search is still running exactly as long as a test needs.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fanfuse.tools.devstack.serve_process import ServeProcess
from fanfuse.tools.stubs import StubSearxServer
from tests.integration.test_mcp_auth import new_key
from tests.support.mcp_harness import child_env, embedded_env, http_server
from tests.support.option_scenarios import web_platforms

CLIENT = Path(__file__).resolve().parents[1] / "mcp_tasks_client"
DOUBLES = {"web_held": "gate/held", "web_quick": "delay/0.2"}
HELD = {"query": "plasma waves", "platform": ["web_held", "web_quick"]}


def node() -> str:
    found = shutil.which("node")
    assert found, "node (v20+) is required: the MCP Tasks test drives the TypeScript requester"
    assert (CLIENT / "node_modules" / "@modelcontextprotocol" / "ext-tasks").is_dir(), (
        "run `npm ci --prefix tests/mcp_tasks_client` (scripts/test does)"
    )
    return found


@pytest.fixture(scope="module")
def stub() -> Iterator[StubSearxServer]:
    with StubSearxServer() as server:
        yield server


@pytest.fixture
def env(tmp_path: Path, stub: StubSearxServer) -> Iterator[dict[str, str]]:
    yield {
        **embedded_env(tmp_path),
        "FANFUSE_EXTRA_PLATFORMS": json.dumps(web_platforms(stub, DOUBLES)),
        "FANFUSE_DEADLINE_SECONDS": "60",
        "FANFUSE_LEASE_SECONDS": "3",
    }
    stub.reset()


def stdio(env: dict[str, str]) -> dict[str, Any]:
    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-m", "fanfuse.cli.main", "mcp"],
        "env": child_env(env),
    }


def http(url: str, key: str | None = None) -> dict[str, Any]:
    return {"transport": "http", "url": url, "headers": {"X-Api-Key": key} if key else {}}


def start(spec: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [node(), str(CLIENT / "run.mjs"), json.dumps(spec)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=CLIENT,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> list[dict[str, Any]]:
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 0, stdout
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def run(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return finish(start(spec))


def reach(stub: StubSearxServer, gate: str, times: int) -> None:
    """Until `times` requests have reached `gate` in all, 20 s at most."""
    deadline = time.monotonic() + 20
    while stub.waiting(gate) < times:
        assert time.monotonic() < deadline, f"{stub.waiting(gate)} requests reached {gate!r}"
        time.sleep(0.02)


def completed_search(record: dict[str, Any]) -> dict[str, Any]:
    """The outcome is the `search` tool's own result: text and the structured digest."""
    assert record["what"] == "outcome" and record["status"] == "completed", record
    result = record["result"]
    assert result["isError"] is False
    digest: dict[str, Any] = result["structuredContent"]
    assert digest["status"] == "completed", digest
    assert result["content"][0]["text"].endswith(f"(task_id {digest['task_id']})")
    return digest


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_search_task_survives_the_server_restarting_and_its_result_is_the_search_tools(
    env: dict[str, str], stub: StubSearxServer, transport: str
) -> None:
    """Start as a task, stop the server while the search waits, start a new server on the same
    database: tasks/get there sees the search resumed, completed, and returns its result."""
    if transport == "stdio":
        first, second = stdio(env), stdio(env)
        (started,) = run({**first, "do": "start", "arguments": HELD})
    else:
        with http_server(env) as url:
            (started,) = run({**http(url), "do": "start", "arguments": HELD})
            reach(stub, "held", 1)
        second = None
    assert started["kind"] == "task", started
    reference = started["reference"]
    assert reference["generation"] == "v2" and reference["originalOperation"] == "tools/call"
    reach(stub, "held", 1)

    def resume(spec: dict[str, Any]) -> list[dict[str, Any]]:
        proc = start({**spec, "do": "resume", "reference": reference})
        reach(stub, "held", 2)  # the new process re-ran the platform the old one left
        stub.release("held")
        return finish(proc)

    if second is not None:
        (outcome,) = resume(second)
    else:
        with http_server(env) as url:
            (outcome,) = resume(http(url))
    digest = completed_search(outcome)
    assert digest["task_id"] == reference["taskId"]  # the MCP task is the fanfuse search
    assert {p["name"]: p["state"] for p in digest["platforms"]} == {
        "web_held": "succeeded", "web_quick": "succeeded",
    }  # fmt: skip
    assert digest["queries"][0]["results"]
    statuses = [e["status"] for e in outcome["events"]]
    assert statuses[-1] == "completed" and set(statuses) <= {"working", "completed"}


def test_a_task_gives_its_progress_message_then_the_same_result_as_a_plain_search(
    env: dict[str, str],
) -> None:
    """With the extension: a handle, working with fanfuse's message, then completed. Without
    it (the same SDK client on the same protocol version): today's synchronous answer."""
    args = {"query": "plasma waves", "platform": ["docs", "web_quick"]}
    (task,) = run({**stdio(env), "do": "settle", "arguments": args})
    assert task["kind"] == "task"
    working = [e["statusMessage"] for e in task["events"] if e["status"] == "working"]
    assert working and all(m for m in working), task["events"]
    digest = completed_search(task)
    (plain,) = run({**stdio(env), "do": "plain", "arguments": args})
    assert plain["era"] == "modern"
    result = plain["result"]
    assert "resultType" not in result or result["resultType"] == "complete"
    synchronous = result["structuredContent"]
    assert synchronous["status"] == "completed" and synchronous["task_id"] != digest["task_id"]
    assert synchronous["queries"] == digest["queries"]


def test_tasks_cancel_cancels_the_search(env: dict[str, str], stub: StubSearxServer) -> None:
    started, outcome = run({**stdio(env), "do": "cancel", "arguments": HELD})
    assert started["kind"] == "task"
    assert outcome == {"what": "outcome", "status": "cancelled"}
    (after,) = run({**stdio(env), "do": "get", "taskId": started["taskId"]})
    assert after == {"what": "answer", "value": "cancelled"}  # in the store, not this process
    (again,) = run({**stdio(env), "do": "cancelId", "taskId": started["taskId"]})
    assert again == {"what": "answer", "value": "acknowledged"}  # over already: still an ack


def test_another_callers_tasks_get_and_cancel_find_nothing(
    env: dict[str, str], stub: StubSearxServer
) -> None:
    alice, bob = new_key(env, "alice"), new_key(env, "bob")
    with http_server(env, "--require-auth") as url:
        (started,) = run({**http(url, alice), "do": "start", "arguments": HELD})
        task_id = started["reference"]["taskId"]
        for do in ("get", "cancelId"):
            (denied,) = run({**http(url, bob), "do": do, "taskId": task_id})
            assert denied["what"] == "error" and denied["code"] == -32602, denied
            assert "not found" in denied["message"].lower()
            (unknown,) = run({**http(url, bob), "do": do, "taskId": "no-such-task"})
            assert unknown["code"] == denied["code"]  # the same answer as an unknown id
        (still,) = run({**http(url, alice), "do": "get", "taskId": task_id})
        assert still == {"what": "answer", "value": "working"}  # bob's cancel did nothing
        stub.release("held")
        (outcome,) = run({**http(url, alice), "do": "resume", "reference": started["reference"]})
    completed_search(outcome)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_listen_stream_sends_the_tasks_completion_then_ends(
    env: dict[str, str], stub: StubSearxServer, transport: str
) -> None:
    """`subscriptions/listen` with `taskIds`: the caller's task is agreed to (an unknown id is
    not), its completion arrives as `notifications/tasks` with the result, and the stream ends
    gracefully once nothing it watches can change."""
    with contextlib.ExitStack() as stack:
        spec = stdio(env) if transport == "stdio" else http(stack.enter_context(http_server(env)))
        proc = start({**spec, "do": "listen", "arguments": HELD})
        assert proc.stdout is not None
        listening = json.loads(proc.stdout.readline())
        assert listening["what"] == "listening", listening
        assert listening["honored"]["taskIds"] == [listening["taskId"]]
        reach(stub, "held", 1)
        stub.release("held")
        (notified,) = finish(proc)
    *_, last = notified["notes"]
    assert last["taskId"] == listening["taskId"] and last["status"] == "completed", last
    assert last["result"]["structuredContent"]["status"] == "completed"
    assert "io.modelcontextprotocol/subscriptionId" in last["_meta"]
    assert notified["end"] == "result"  # the graceful end: the listen request answered


def test_with_a_remote_stack_the_task_survives_the_mcp_server_restarting(
    env: dict[str, str], stub: StubSearxServer, tmp_path: Path
) -> None:
    """`fanfuse mcp --endpoint` in front of a stack (`fanfuse serve` here): the search runs on
    the stack, and a new MCP process finds its URLs (kept in its cache directory) and its
    result, though the API gives them only in the answer to the start."""
    stack_env = child_env({**env, "FANFUSE_DB_PATH": str(tmp_path / "stack.db")})
    with ServeProcess("--warm", "none", env=stack_env, log_dir=tmp_path) as stack:
        mcp_env = {"FANFUSE_CACHE_DIR": str(tmp_path / "mcp-cache")}
        spec = stdio(mcp_env)
        spec["args"] += ["--endpoint", f"{stack.url}/start_search", "--api-key", stack.api_key]
        (started,) = run({**spec, "do": "start", "arguments": HELD})
        assert started["kind"] == "task", started
        reach(stub, "held", 1)
        proc = start({**spec, "do": "resume", "reference": started["reference"]})
        stub.release("held")
        (outcome,) = finish(proc)
    assert completed_search(outcome)["task_id"] == started["reference"]["taskId"]
    assert stub.waiting("held") == 1  # the stack ran it once: the restart was the MCP server's
