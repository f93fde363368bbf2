"""A task delivery's verdict (`fanfuse.http.deliveries`): every outcome of a delivery, from its
check to its work, and what each front makes of the verdict: the Cloud Functions' HTTP answer
and the Lambda's batch response (with the held lease's visibility change).

The deliveries run through the real check (`auth.task_deliveries`, HMAC-signed as the local queue
signs) and a service whose task entries return or raise what the row says.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any

import pytest
from pydantic import SecretStr

from fanfuse.auth.task_deliveries import SIGNATURE_HEADER
from fanfuse.fronts import functions
from fanfuse.fronts.aws_lambda import front
from fanfuse.http import deliveries
from fanfuse.http.deliveries import TASK_NAME_HEADER, Verdict
from fanfuse.queue.port import AggregateMessage, PlatformMessage
from fanfuse.settings import Settings
from fanfuse.wire.errors import (
    LeaseHeld,
    QueueUnavailable,
    StoreUnavailable,
    TaskNotFound,
    UnknownPlatform,
)
from tests.support.signing import task_signature

SECRET = "deliveries-tests"
SETTINGS = Settings(tasks_hmac_secret=SecretStr(SECRET))
MESSAGE = {"task_id": "t1", "platform": "docs"}


class _Tasks:
    """The service's two task entries: each returns `result`, or raises it."""

    def __init__(self, result: str | Exception = "succeeded") -> None:
        self.result = result
        self.ran: list[PlatformMessage | AggregateMessage] = []

    async def _answer(self, message: PlatformMessage | AggregateMessage) -> str:
        self.ran.append(message)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result

    async def run_platform(self, message: PlatformMessage) -> str:
        return await self._answer(message)

    async def aggregate(self, message: AggregateMessage) -> str:
        return await self._answer(message)


def run(coro: Coroutine[Any, Any, str]) -> str:
    return asyncio.run(coro)


def deliver(
    body: Any,
    result: str | Exception = "succeeded",
    *,
    target: str = "run_platform",
    queued: bool = True,
    signed: bool = True,
    content_type: str = "application/json",
) -> tuple[Verdict, _Tasks]:
    raw = (body if isinstance(body, str) else json.dumps(body)).encode()
    headers = {"content-type": content_type}  # names in any case
    if signed:
        headers[SIGNATURE_HEADER.lower()] = task_signature(target, raw, SECRET)
    if queued:
        headers[TASK_NAME_HEADER] = "projects/p/locations/l/queues/q/tasks/t1--docs"
    tasks = _Tasks(result)
    decided = deliveries.verdict(
        target, headers, raw, settings=SETTINGS, tasks=lambda: tasks, run=run
    )
    return decided, tasks


def summary(decided: Verdict) -> tuple[str, int | None, float | None]:
    status = None if decided.error is None else decided.error.status_code
    return decided.outcome, status, decided.after_s


@pytest.mark.parametrize(
    ("case", "body", "result", "options", "expected"),
    [
        ("ran", MESSAGE, "succeeded", {}, ("done", None, None)),
        ("aggregated", {"task_id": "t1"}, "waiting", {"target": "aggregate"}, ("done", None, None)),
        ("unsigned", MESSAGE, "succeeded", {"signed": False}, ("retry", 401, None)),
        ("too large", {"task_id": "t" * 70_000}, "x", {}, ("retry", 413, None)),
        ("not JSON", "{", "succeeded", {}, ("drop", 400, None)),
        ("not JSON media", MESSAGE, "x", {"content_type": "text/plain"}, ("drop", 415, None)),
        ("bad fields", {"task_id": "t1"}, "succeeded", {}, ("drop", 400, None)),
        ("bad task id", {"task_id": "../x", "platform": "docs"}, "x", {}, ("drop", 400, None)),
        ("bad platform", {"task_id": "t1", "platform": "Docs!"}, "x", {}, ("drop", 400, None)),
        ("unknown platform", MESSAGE, UnknownPlatform("docs"), {}, ("drop", 400, None)),
        ("unknown task", MESSAGE, TaskNotFound("t1"), {}, ("drop", 404, None)),
        ("direct 4xx", MESSAGE, UnknownPlatform("docs"), {"queued": False}, ("retry", 400, None)),
        ("queue down", MESSAGE, QueueUnavailable("down"), {}, ("retry", 503, None)),
        ("store stalled", MESSAGE, StoreUnavailable("slow", 2.5), {}, ("retry", 503, 3.0)),
        ("lease held", MESSAGE, LeaseHeld("held", retry_after_s=1.2), {}, ("retry", 503, 2.0)),
        ("a bug", MESSAGE, RuntimeError("boom"), {}, ("retry", 503, None)),
    ],
)  # fmt: skip
def test_every_outcome_of_a_delivery_has_its_verdict(
    case: str,
    body: Any,
    result: str | Exception,
    options: dict[str, Any],
    expected: tuple[str, int | None, float | None],
) -> None:
    decided, tasks = deliver(body, result, **options)
    assert summary(decided) == expected, case
    # Refused or unparsable: nothing ran; else the work ran once (and its error decided).
    unparsed = expected[0] == "drop" and not isinstance(result, Exception)
    assert len(tasks.ran) == (0 if expected[1] in (401, 413) or unparsed else 1), case


def test_done_carries_the_targets_answer() -> None:
    ran, _ = deliver(MESSAGE, "succeeded")
    assert ran.answer == {"task_id": "t1", "platform": "docs", "outcome": "succeeded"}
    waited, _ = deliver({"task_id": "t1", "deadline": True}, "finalized", target="aggregate")
    assert waited.answer == {"task_id": "t1", "outcome": "finalized"}


def test_a_body_signed_for_one_target_is_refused_at_the_other() -> None:
    raw = json.dumps({"task_id": "t1"}).encode()
    headers = {SIGNATURE_HEADER: task_signature("run_platform", raw, SECRET)}
    decided = deliveries.verdict(
        "aggregate", headers, raw, settings=SETTINGS, tasks=_Tasks, run=run
    )
    assert summary(decided) == ("retry", 401, None)


def test_only_task_targets_have_verdicts() -> None:
    with pytest.raises(ValueError, match="not a task target"):
        deliveries.verdict("start_search", {}, b"{}", settings=SETTINGS, tasks=_Tasks, run=run)


@pytest.mark.parametrize(
    ("decided", "status", "body", "retry_after"),
    [
        (deliveries.done({"outcome": "succeeded"}), 200, {"outcome": "succeeded"}, None),
        (
            Verdict("drop", error=TaskNotFound("t1")),
            200,
            {"outcome": "dropped", "error": TaskNotFound("t1").body().model_dump()},
            None,
        ),
        (deliveries.retry(LeaseHeld("held", 1.2)), 503, LeaseHeld("held", 1.2).body(), "2"),
        (deliveries.retry(UnknownPlatform("docs")), 400, UnknownPlatform("docs").body(), None),
    ],
)
def test_the_functions_answer_each_verdict_with_its_status(
    decided: Verdict, status: int, body: Any, retry_after: str | None
) -> None:
    answer = functions.verdict_response(decided)
    expected = body if isinstance(body, dict) else body.model_dump(mode="json")
    assert (answer.status_code, answer.get_json()) == (status, expected)
    assert answer.headers.get("Retry-After") == retry_after


class _Visibility:
    """Records what the Lambda asks of SQS for a record to retry (`SqsQueue.retry_in`)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float]] = []

    def retry_in(self, queue_arn: str, receipt: str, seconds: float) -> None:
        self.calls.append((queue_arn, receipt, seconds))


@pytest.mark.parametrize(
    ("decided", "failed", "visible_in"),
    [
        (deliveries.done({"outcome": "succeeded"}), False, None),
        (Verdict("drop", error=TaskNotFound("t1")), False, None),
        (deliveries.retry(QueueUnavailable("down")), True, None),
        (deliveries.retry(LeaseHeld("held", retry_after_s=1.2)), True, 2.0),
    ],
)
def test_the_lambda_maps_each_verdict_to_the_batch_response(
    monkeypatch: pytest.MonkeyPatch, decided: Verdict, failed: bool, visible_in: float | None
) -> None:
    visibility = _Visibility()
    monkeypatch.setattr(front, "_queue", visibility)
    monkeypatch.setattr(front, "verdict", lambda target, record: decided)
    record = {"messageId": "m1", "receiptHandle": "r1", "eventSourceARN": "arn:q", "body": "{}"}
    result = front.worker({"Records": [record]}, None)
    assert result == {"batchItemFailures": [{"itemIdentifier": "m1"}] if failed else []}
    assert visibility.calls == ([] if visible_in is None else [("arn:q", "r1", visible_in)])
