"""The two wrappers of cloud.py map errors to answers by type, without emulators.

The HTTP contract itself is tested end to end (tests/e2e/test_e2e_http.py); this pins what the
emulators cannot easily provoke: a 5xx error of the service, and an unexpected exception.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import flask
import pytest
from pydantic import SecretStr

from fanfuse import cloud
from fanfuse.auth.tasks import SIGNATURE_HEADER, sign
from fanfuse.errors import QueueUnavailable, UnknownPlatform
from fanfuse.queue.base import AggregateMessage, PlatformMessage
from fanfuse.settings import Settings

SECRET = "wrapper-tests"


class _Service:
    """Raises `error` from every call the targets make."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def start(self, payload: Any, caller: Any = None) -> Any:
        raise self.error

    async def run_platform(self, message: PlatformMessage) -> str:
        raise self.error

    def aggregate(self, message: AggregateMessage) -> str:
        raise self.error


@pytest.fixture
def app() -> Iterator[flask.Flask]:
    cloud._settings = Settings(tasks_hmac_secret=SecretStr(SECRET))
    yield flask.Flask("wrappers")
    cloud._service = None
    cloud._settings = None


def call(
    app: flask.Flask,
    target: Callable[[flask.Request], flask.Response],
    error: Exception,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> flask.Response:
    """POST `body` to `target`, signed as the local queue signs task deliveries."""
    cloud._service = _Service(error)  # type: ignore[assignment]
    data = json.dumps(body)
    signed = {SIGNATURE_HEADER: sign(data.encode(), SECRET), **(headers or {})}
    with app.test_request_context(
        "/", method="POST", data=data, content_type="application/json", headers=signed
    ):
        return target(flask.request)


MESSAGE = {"task_id": "t1", "platform": "docs"}
FROM_TASKS = {cloud.TASK_NAME_HEADER: "projects/p/locations/l/queues/q/tasks/t1--docs"}


def test_public_target_answers_the_services_5xx_and_503_for_anything_else(
    app: flask.Flask,
) -> None:
    queue = call(app, cloud.start_search, QueueUnavailable("no queue"), {"query": "q"})
    assert queue.status_code == 503 and queue.get_json()["error"] == "queue_unavailable"
    bug = call(app, cloud.start_search, RuntimeError("boom"), {"query": "q"})
    assert bug.status_code == 503 and bug.get_json() == {
        "error": "unavailable",
        "message": "start_search is temporarily unavailable; try again",
        "problems": [],
    }


def test_task_target_drops_a_permanent_error_only_for_cloud_tasks(app: flask.Flask) -> None:
    direct = call(app, cloud.run_platform, UnknownPlatform("docs"), MESSAGE)
    assert direct.status_code == 400 and direct.get_json()["problems"] == [
        {"field": "platform", "problem": "'docs' is not a platform of this search"}
    ]
    dropped = call(app, cloud.run_platform, UnknownPlatform("docs"), MESSAGE, FROM_TASKS)
    assert dropped.status_code == 200
    assert dropped.get_json()["outcome"] == "dropped"
    assert dropped.get_json()["error"]["error"] == "invalid_request"


@pytest.mark.parametrize("error", [QueueUnavailable("no queue"), ConnectionError("reset")])
def test_task_target_answers_5xx_for_a_retryable_failure(
    app: flask.Flask, error: Exception
) -> None:
    for target, body in ((cloud.run_platform, MESSAGE), (cloud.aggregate, {"task_id": "t1"})):
        answer = call(app, target, error, body, FROM_TASKS)
        assert answer.status_code == 503, answer.get_json()
