"""A task delivery's verdict: what the queue is to do with one delivery of `run_platform` or
`aggregate`, decided once for both fronts that receive them.

Cloud Tasks delivers a task as an HTTP POST to a Cloud Function (`fronts/functions.py`, Flask);
SQS delivers it as a record of a Lambda event (`fronts/aws_lambda/front.py`). Both hand
`verdict` what they both have (the target's name, the headers, the body bytes), and only map its
answer to their own terms: Flask to an HTTP status and body (which Cloud Tasks reads), the Lambda
to `batchItemFailures` and a message's visibility (which SQS reads). So the delivery semantics
(which failures are permanent, which are retried and when) are written here alone, in terms of
the queue, and neither front reads them back from the other's answer.

The three verdicts:

| outcome | when                                               | the queue                    |
|---------|----------------------------------------------------|------------------------------|
| `done`  | the target ran (`answer`: its JSON)                | forgets the task             |
| `drop`  | a verified queue delivery that can never succeed:  | forgets it (logged as an     |
|         | a malformed body, bad ids, an unknown task, a      | error), so a hopeless task   |
|         | platform its search lacks (any 4xx while running)  | is not retried forever       |
| `retry` | infrastructure (any 5xx, or anything unexpected),  | delivers it again: after     |
|         | and every refusal (`error`'s 401/403/413, or a 4xx | `after_s` when the error     |
|         | to a signed direct call, which no queue sends)     | names it (a held lease's     |
|         |                                                    | Retry-After), else after its |
|         |                                                    | own backoff; a refused       |
|         |                                                    | message ends dead-lettered   |

Order: size, then where the delivery comes from (`auth.task_deliveries.verify_delivery`: the queue's
HMAC signature or OIDC token), before the body is parsed; a delivery that fails that check is never
acknowledged, since only a verified one is known to be the queue's (see `auth.task_deliveries`). A
delivery is the queue's own when it names its task (`X-CloudTasks-TaskName`, which Cloud Tasks
sends and the Lambda front sets to the SQS message id): only then is a permanent failure a
`drop`; a signed direct call gets the plain 4xx. Errors are told apart by type (their status,
`fanfuse.wire.errors`), never by message.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Coroutine, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from fanfuse.auth.task_deliveries import verify_delivery
from fanfuse.http.api import check_length, check_task_id, decode_json, error_answer, parse
from fanfuse.queue.port import AggregateMessage, PlatformMessage
from fanfuse.settings import Settings
from fanfuse.support import logs
from fanfuse.support.retry_after import parse_retry_after
from fanfuse.tracing import delivery
from fanfuse.wire.errors import FanfuseError, InvalidRequest, Unavailable
from fanfuse.wire.models import Problem

log = logging.getLogger(__name__)

TASK_NAME_HEADER = "X-CloudTasks-TaskName"
"""Names the task of a queue's own delivery (Cloud Tasks sends it; the Lambda front sets it)."""

TaskMessage = PlatformMessage | AggregateMessage
MESSAGES: dict[str, type[PlatformMessage] | type[AggregateMessage]] = {
    "run_platform": PlatformMessage,
    "aggregate": AggregateMessage,
}
"""The task targets and the body each takes."""

PLATFORM = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
"""What a platform name in a task body may look like (it becomes part of a document path)."""

Outcome = Literal["done", "drop", "retry"]


class Tasks(Protocol):
    """What a delivery runs: the service's two task entries (`SearchService`)."""

    async def run_platform(self, message: PlatformMessage) -> str: ...

    async def aggregate(self, message: AggregateMessage) -> str: ...


Runner = Callable[[Coroutine[Any, Any, str]], str]
"""Runs a task entry's coroutine to its end (the cloud runtime's per-thread loop)."""


@dataclass(frozen=True)
class Verdict:
    """What the queue is to do with one delivery (see the module's table)."""

    outcome: Outcome
    answer: dict[str, Any] | None = None
    """`done`: the target's JSON answer."""
    error: FanfuseError | None = None
    """`drop` and `retry`: what went wrong (its status and body are the HTTP answer)."""
    after_s: float | None = None
    """`retry`: deliver again after this many seconds (the error's Retry-After), if it says."""


class _Headers:
    """Header lookup by name regardless of case, over any mapping (`auth.tokens.Headers`)."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._by_name = {name.lower(): value for name, value in headers.items()}

    def get(self, key: str, /) -> str | None:
        return self._by_name.get(key.lower())


def done(answer: dict[str, Any]) -> Verdict:
    return Verdict("done", answer=answer)


def retry(error: FanfuseError) -> Verdict:
    """Not acknowledged: delivered again, after the error's Retry-After when it has one."""
    wait = parse_retry_after(error_answer(error).headers.get("Retry-After"))
    return Verdict("retry", error=error, after_s=wait)


def _permanent(target: str, headers: _Headers, error: FanfuseError) -> Verdict:
    """A delivery that can never succeed: dropped when the queue sent it, else its 4xx."""
    task_name = headers.get(TASK_NAME_HEADER)
    if task_name is None:
        return retry(error)
    log.error("%s: dropping task %s: %s", target, task_name, error.body())
    return Verdict("drop", error=error)


def _infrastructure(target: str) -> Verdict:
    """Anything but a FanfuseError is taken for infrastructure: logged, retried (503)."""
    log.exception("%s failed", target)
    return retry(Unavailable(f"{target} is temporarily unavailable; try again"))


def check_message(message: TaskMessage) -> None:
    """Ids from a task body become document paths: refuse anything but plain names."""
    check_task_id(message.task_id)
    if isinstance(message, PlatformMessage) and not PLATFORM.match(message.platform):
        raise InvalidRequest([Problem(field="platform", problem="not a platform name")])
    member = message.member if isinstance(message, PlatformMessage) else None
    if member is not None and not PLATFORM.match(member):
        raise InvalidRequest([Problem(field="member", problem="not a platform name")])


def work(tasks: Tasks, message: TaskMessage, run: Runner) -> dict[str, Any]:
    """Run one task (idempotent: the store's lifecycle makes a second delivery harmless) into
    the target's JSON answer."""
    if isinstance(message, PlatformMessage):
        outcome = run(tasks.run_platform(message))
        return {"task_id": message.task_id, "platform": message.platform, "outcome": outcome}
    return {"task_id": message.task_id, "outcome": run(tasks.aggregate(message))}


def verdict(
    target: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    settings: Settings,
    tasks: Callable[[], Tasks],
    run: Runner,
) -> Verdict:
    """The verdict on one delivery of `body` to the task target `target` (see the module).

    `tasks` builds (or returns) the service only once the delivery is verified and parsed, so a
    refused delivery touches nothing; its failure is infrastructure like any other."""
    if target not in MESSAGES:
        raise ValueError(f"not a task target: {target}")
    with ExitStack() as context:
        try:  # the trace is read inside the error handling: no header escapes as a 500
            context.enter_context(logs.request_context(headers))
        except Exception:
            return _infrastructure(target)
        folded = _Headers(headers)
        try:
            check_length(len(body))
            verify_delivery(target, folded, body, settings)
        except FanfuseError as exc:
            log.warning("%s: refused a delivery: %s", target, exc)
            return retry(exc)
        except Exception:
            return _infrastructure(target)
        try:
            data = decode_json(body, folded.get("Content-Type"))
            message: TaskMessage = parse(MESSAGES[target], data)
            check_message(message)
        except FanfuseError as exc:
            return _permanent(target, folded, exc)
        with (
            logs.task_context(message.task_id, getattr(message, "platform", None)),
            delivery.inbound(headers, target),  # the trace continued (tracing/delivery.py)
        ):
            try:
                return done(work(tasks(), message, run))
            except FanfuseError as exc:
                if exc.status_code >= 500:
                    return retry(exc)
                return _permanent(target, folded, exc)
            except Exception:
                return _infrastructure(target)


__all__ = ["MESSAGES", "TASK_NAME_HEADER", "Tasks", "Verdict", "check_message", "verdict", "work"]
