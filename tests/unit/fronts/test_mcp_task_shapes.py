"""The MCP Tasks extension's pure parts (fronts/mcp/tasks.py): who gets a task, how a fanfuse
search reads as a task. The protocol end to end, with the official TypeScript requester, is
tests/integration/test_mcp_tasks.py."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from mcp_types import ClientCapabilities
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from fanfuse.fronts.mcp.tasks import EXTENSION_ID, declared, detailed_task, task_status
from fanfuse.fronts.mcp.tools import of_view
from fanfuse.wire.models import TaskStatus, TaskView, utcnow
from fanfuse.wire.request import SearchRequest

MODERN = sorted(MODERN_PROTOCOL_VERSIONS)[0]


@pytest.mark.parametrize(
    ("status", "task"),
    [
        (TaskStatus.PENDING, "working"),
        (TaskStatus.RUNNING, "working"),
        (TaskStatus.COMPLETED, "completed"),
        (TaskStatus.PARTIAL, "completed"),  # results with a failure noted: a tool result
        (TaskStatus.FAILED, "completed"),  # a tool result saying so, not a JSON-RPC error
        (TaskStatus.CANCELLED, "cancelled"),
    ],
)
def test_every_search_status_is_a_task_status(status: TaskStatus, task: str) -> None:
    assert task_status(status) == task


def view(status: TaskStatus) -> TaskView:
    now = utcnow()
    return TaskView(
        task_id="t1",
        request=SearchRequest(query="plasma"),
        queries=["plasma"],
        platforms=["docs"],
        status=status,
        fusion="rrf",
        created_at=now,
        updated_at=now + timedelta(seconds=2),
        deadline_at=now + timedelta(seconds=120),
        expires_at=now + timedelta(minutes=30),
    )


def test_a_running_search_is_a_working_task_with_its_progress_message_and_no_result() -> None:
    running = view(TaskStatus.RUNNING)
    task = detailed_task(running)
    assert task["taskId"] == "t1" and task["status"] == "working"
    assert task["statusMessage"] == running.progress.message
    assert "result" not in task
    assert task["ttlMs"] == 30 * 60 * 1000  # until the search expires from the store
    assert task["createdAt"].endswith("Z") and task["lastUpdatedAt"] > task["createdAt"]
    assert task["pollIntervalMs"] > 0


def test_a_finished_search_carries_the_search_tools_own_result() -> None:
    done = view(TaskStatus.COMPLETED)
    task = detailed_task(done)
    expected = of_view(done).model_dump(by_alias=True, mode="json", exclude_none=True)
    assert task["result"] == {"resultType": "complete", **expected}
    assert task["result"]["structuredContent"]["task_id"] == "t1"
    assert "result" not in detailed_task(view(TaskStatus.CANCELLED))


def context(version: str, extensions: dict[str, Any] | None) -> Any:
    capabilities = ClientCapabilities(extensions=extensions) if extensions is not None else None
    return SimpleNamespace(
        protocol_version=version, session=SimpleNamespace(client_capabilities=capabilities)
    )


@pytest.mark.parametrize(
    ("version", "extensions", "tasks"),
    [
        (MODERN, {EXTENSION_ID: {}}, True),
        (MODERN, {}, False),  # no extension declared: today's search
        (MODERN, None, False),
        (MODERN, {"io.modelcontextprotocol/ui": {}}, False),
        ("2025-11-25", {EXTENSION_ID: {}}, False),  # that revision's tasks are not these
        ("2025-06-18", {EXTENSION_ID: {}}, False),
    ],
)
def test_only_a_2026_request_declaring_the_extension_gets_a_task(
    version: str, extensions: dict[str, Any] | None, tasks: bool
) -> None:
    assert declared(context(version, extensions)) is tasks
