"""The cloud TaskQueue: Cloud Tasks HTTP tasks POSTing JSON to the run_platform/aggregate targets.

- One queue per platform (`{queue_prefix}-{platform, _ as -}`: its rate limit and concurrency
  are the provider's quota) and one for aggregation (`{queue_prefix}-aggregate`), which also
  holds the delayed deadline task. The names come from the port (`queue_id`), which
  `fanfuse dev` uses too.
- Named tasks (`{task_id}--{platform}`, `{task_id}--aggregate`, `{task_id}--deadline`) make
  Cloud Tasks refuse duplicates; ALREADY_EXISTS therefore means "already enqueued": success.
  Because creation is idempotent under a name, transient errors are retried here too.
- Bodies are JSON with an explicit `Content-Type: application/json` (Cloud Tasks and the emulator
  would otherwise send a form-encoded content type).
- Each task proves to its target where it comes from (`fanfuse.auth.task_deliveries`): in
  production an OIDC token of the tasks service account for the target URL; where an HMAC secret is
  set (the local stack: the emulator ignores tokens but forwards headers), a signature of the
  target, the body and its validity window (from the schedule time) in `X-Fanfuse-Signature`.
- Each task's headers also carry its trace and the moment it was enqueued
  (`fanfuse.tracing.delivery`), which the target continues.

The Google client is imported and created on first use: search_status and cancel_search never
enqueue, so they never import it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fanfuse.auth.task_deliveries import SIGNATURE_HEADER, hmac_secret, signature_for
from fanfuse.queue.port import (
    AGGREGATE_QUEUE,
    AggregateMessage,
    PlatformMessage,
    TaskQueue,
    concurrently,
    queue_id,
    task_name,
)
from fanfuse.settings import Settings
from fanfuse.tracing import delivery

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient, Task

log = logging.getLogger(__name__)

CREATE_TIMEOUT = 10.0
"""Seconds for one CreateTask call (the retry below bounds the total at RETRY_DEADLINE)."""
RETRY_DEADLINE = 30.0
MIN_DISPATCH_DEADLINE = 15
MAX_DISPATCH_DEADLINE = 1800
"""Cloud Tasks accepts dispatch deadlines of 15 s to 30 min for HTTP targets."""
DISPATCH_MARGIN = 30
"""A platform task may run until the search deadline; give the HTTP call that plus a margin."""


class CloudTasksQueue(TaskQueue):
    """TaskQueue on Cloud Tasks; `client` defaults to the emulator's or production's."""

    def __init__(self, settings: Settings, client: CloudTasksClient | None = None) -> None:
        self.settings = settings
        self._client = client
        self._lock = threading.Lock()
        self.emulated = settings.tasks_emulator_host is not None
        if not self.emulated and not settings.tasks_service_account:
            log.warning(
                "FANFUSE_TASKS_SERVICE_ACCOUNT is not set: tasks carry no OIDC token, so "
                "task targets that require authentication will refuse them"
            )

    @property
    def client(self) -> CloudTasksClient:
        with self._lock:
            if self._client is None:
                host = self.settings.tasks_emulator_host
                if host:
                    from fanfuse.queue.grpc_channel import tasks_client

                    self._client = tasks_client(host)
                else:
                    from google.cloud.tasks_v2 import CloudTasksClient

                    self._client = CloudTasksClient()
            return self._client

    # -- names --------------------------------------------------------------------------------

    def queue_path(self, name: str) -> str:
        """Full name of the queue of platform `name` (or of "aggregate")."""
        s = self.settings
        return f"projects/{s.project}/locations/{s.region}/queues/{queue_id(s.queue_prefix, name)}"

    def task_path(self, queue: str, task_id: str, suffix: str) -> str:
        return f"{self.queue_path(queue)}/tasks/{task_name(task_id, suffix)}"

    def target_url(self, target: str) -> str:
        url = self.settings.function_urls.get(target)
        if not url:
            raise ValueError(
                f"no URL for the {target} function: set FANFUSE_FUNCTION_URLS "
                f'(JSON, e.g. {{"{target}": "https://..."}})'
            )
        return url

    # -- building tasks (pure: what the client is asked to send) -------------------------------

    def platform_task(self, message: PlatformMessage) -> tuple[str, Task]:
        """(queue, task) for one platform run."""
        dispatch = int(self.settings.deadline_seconds) + DISPATCH_MARGIN
        dispatch = min(max(dispatch, MIN_DISPATCH_DEADLINE), MAX_DISPATCH_DEADLINE)
        return self.queue_path(message.queue), self._task(
            name=self.task_path(message.queue, message.task_id, message.suffix),
            target="run_platform",
            body=message.model_dump_json().encode(),
            dispatch_seconds=dispatch,
            platform=message.platform,
        )

    def aggregate_task(
        self, message: AggregateMessage, at: datetime | None = None
    ) -> tuple[str, Task]:
        """(queue, task) for aggregation, or for the deadline when `message.deadline`."""
        suffix = "deadline" if message.deadline else "aggregate"
        return self.queue_path(AGGREGATE_QUEUE), self._task(
            name=self.task_path(AGGREGATE_QUEUE, message.task_id, suffix),
            target="aggregate",
            body=message.model_dump_json().encode(),
            schedule=at,
        )

    def _task(
        self,
        *,
        name: str,
        target: str,
        body: bytes,
        schedule: datetime | None = None,
        dispatch_seconds: int | None = None,
        platform: str | None = None,
    ) -> Task:
        from google.cloud import tasks_v2
        from google.protobuf import duration_pb2

        url = self.target_url(target)
        headers = {"Content-Type": "application/json", **delivery.outbound(target, platform)}
        secret = hmac_secret(self.settings)
        if secret is not None:
            headers[SIGNATURE_HEADER] = signature_for(target, body, secret, self.settings, schedule)
        request = tasks_v2.HttpRequest(
            http_method=tasks_v2.HttpMethod.POST, url=url, headers=headers, body=body
        )
        account = self.settings.tasks_service_account
        if account and not self.emulated:
            request.oidc_token = tasks_v2.OidcToken(service_account_email=account, audience=url)
        fields: dict[str, Any] = {"name": name, "http_request": request}
        if schedule is not None:
            fields["schedule_time"] = schedule
        if dispatch_seconds is not None:
            fields["dispatch_deadline"] = duration_pb2.Duration(seconds=dispatch_seconds)
        return tasks_v2.Task(**fields)

    # -- TaskQueue ----------------------------------------------------------------------------

    def enqueue_platform(self, message: PlatformMessage) -> None:
        self._create(*self.platform_task(message))

    def enqueue_platforms(self, messages: Sequence[PlatformMessage]) -> None:
        concurrently(self, messages)  # one CreateTask round trip each, at once

    def enqueue_aggregate(self, message: AggregateMessage, at: datetime | None = None) -> None:
        self._create(*self.aggregate_task(message, at))

    def _create(self, parent: str, task: Task) -> None:
        """Create a named task; ALREADY_EXISTS (a duplicate, or a retry that landed) is success."""
        from google.api_core import exceptions, retry

        transient = retry.Retry(
            predicate=retry.if_exception_type(
                exceptions.ServiceUnavailable,
                exceptions.DeadlineExceeded,
                exceptions.InternalServerError,
                exceptions.TooManyRequests,
            ),
            initial=0.1,
            maximum=2.0,
            multiplier=2.0,
            timeout=RETRY_DEADLINE,
        )
        try:
            self.client.create_task(
                parent=parent, task=task, retry=transient, timeout=CREATE_TIMEOUT
            )
        except exceptions.AlreadyExists:
            log.info("task %s already exists: not enqueued again", task.name)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                transport: Any = self._client.transport
                transport.close()
                self._client = None
