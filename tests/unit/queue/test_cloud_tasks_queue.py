"""CloudTasksQueue against the Cloud Tasks contract that the emulator does not enforce.

The real `CloudTasksClient` sends real `google.cloud.tasks_v2` requests over gRPC to a small
in-process server that records each CreateTaskRequest and, like the service, refuses a second
task with the same name (ALREADY_EXISTS) and can fail transiently (UNAVAILABLE). So these tests
see exactly what production Cloud Tasks would receive: queue, task names, OIDC token, schedule
time, dispatch deadline, content type and body.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import tasks_v2
from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport
from werkzeug.datastructures import Headers

from fanfuse.auth.task_deliveries import SIGNATURE_HEADER, verify_delivery
from fanfuse.queue.cloud_tasks import CloudTasksQueue
from fanfuse.queue.port import AggregateMessage, PlatformMessage
from fanfuse.settings import Settings
from fanfuse.tracing import delivery
from fanfuse.wire.errors import Unauthorized
from fanfuse.wire.models import utcnow

URLS = {
    "run_platform": "https://run-platform-abc-uc.a.run.app",
    "aggregate": "https://aggregate-abc-uc.a.run.app",
}
SA = "fanfuse-tasks@demo-fanfuse.iam.gserviceaccount.com"
QUEUES = "projects/demo-fanfuse/locations/europe-west1/queues"


@dataclass
class Recorder:
    """The server side: every CreateTaskRequest received, and failures to inject."""

    requests: list[tasks_v2.CreateTaskRequest] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    fail_next: list[grpc.StatusCode] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def create_task(
        self, request: tasks_v2.CreateTaskRequest, context: grpc.ServicerContext
    ) -> tasks_v2.Task:
        with self.lock:
            self.requests.append(request)
            if self.fail_next:
                context.abort(self.fail_next.pop(0), "injected failure")
            if request.task.name in self.names:
                context.abort(grpc.StatusCode.ALREADY_EXISTS, "Requested entity already exists")
            self.names.add(request.task.name)
        return request.task


@pytest.fixture
def recorder() -> Iterator[tuple[Recorder, str]]:
    rec = Recorder()
    handler = grpc.method_handlers_generic_handler(
        "google.cloud.tasks.v2.CloudTasks",
        {
            "CreateTask": grpc.unary_unary_rpc_method_handler(
                rec.create_task,
                request_deserializer=tasks_v2.CreateTaskRequest.deserialize,
                response_serializer=tasks_v2.Task.serialize,
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield rec, f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


def make_queue(host: str, *, emulator: bool, **overrides: object) -> CloudTasksQueue:
    fields: dict[str, object] = {
        "project": "demo-fanfuse",
        "region": "europe-west1",
        "function_urls": URLS,
        "tasks_service_account": SA,
        "tasks_emulator_host": host if emulator else None,
        "deadline_seconds": 120,
        **overrides,
    }
    settings = Settings.model_validate(fields)
    client = tasks_v2.CloudTasksClient(
        transport=CloudTasksGrpcTransport(channel=grpc.insecure_channel(host))
    )
    return CloudTasksQueue(settings, client=client)


def test_platform_task_production_contract(recorder: tuple[Recorder, str]) -> None:
    rec, host = recorder
    queue = make_queue(host, emulator=False)
    queue.enqueue_platform(PlatformMessage(task_id="t1", platform="sec_edgar"))
    (request,) = rec.requests
    assert request.parent == f"{QUEUES}/fanfuse-sec-edgar"
    task = request.task
    assert task.name == f"{QUEUES}/fanfuse-sec-edgar/tasks/t1--sec-edgar"
    http = task.http_request
    assert http.http_method == tasks_v2.HttpMethod.POST
    assert http.url == URLS["run_platform"]
    headers = dict(http.headers)
    enqueued = delivery.enqueued_at(headers)  # the timeline's `queued` (tracing/delivery.py)
    assert enqueued is not None and abs((utcnow() - enqueued).total_seconds()) < 60
    # tracing off: no trace context rides along
    assert {k: v for k, v in headers.items() if k != delivery.ENQUEUED_AT} == {
        "Content-Type": "application/json"
    }
    assert json.loads(http.body) == {"task_id": "t1", "platform": "sec_edgar"}
    assert http.oidc_token.service_account_email == SA
    assert http.oidc_token.audience == URLS["run_platform"]
    # A run may last until the search deadline: the HTTP call gets that plus a margin.
    assert task.dispatch_deadline == timedelta(seconds=150)
    assert not task.schedule_time  # now


def test_aggregate_and_deadline_tasks(recorder: tuple[Recorder, str]) -> None:
    rec, host = recorder
    queue = make_queue(host, emulator=False)
    at = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    queue.enqueue_aggregate(AggregateMessage(task_id="t1", deadline=True), at=at)
    queue.enqueue_aggregate(AggregateMessage(task_id="t1"))
    deadline, now = (r.task for r in rec.requests)
    assert [r.parent for r in rec.requests] == [f"{QUEUES}/fanfuse-aggregate"] * 2
    assert deadline.name == f"{QUEUES}/fanfuse-aggregate/tasks/t1--deadline"
    assert now.name == f"{QUEUES}/fanfuse-aggregate/tasks/t1--aggregate"
    assert deadline.schedule_time == at
    assert not now.schedule_time
    for task, body in ((deadline, {"task_id": "t1", "deadline": True}), (now, None)):
        assert task.http_request.url == URLS["aggregate"]
        assert task.http_request.headers["Content-Type"] == "application/json"
        assert task.http_request.oidc_token.audience == URLS["aggregate"]
        if body is not None:
            assert json.loads(task.http_request.body) == body
    assert json.loads(now.http_request.body) == {"task_id": "t1", "deadline": False}


def test_no_oidc_token_for_the_emulator(recorder: tuple[Recorder, str]) -> None:
    rec, host = recorder
    make_queue(host, emulator=True).enqueue_platform(PlatformMessage(task_id="t", platform="docs"))
    http = rec.requests[0].task.http_request
    assert "oidc_token" not in http  # proto-plus: the field is unset
    assert http.headers["Content-Type"] == "application/json"


def test_with_a_task_secret_each_body_is_signed_as_its_target_checks(
    recorder: tuple[Recorder, str],
) -> None:
    rec, host = recorder
    queue = make_queue(host, emulator=True, tasks_hmac_secret="s3cret")
    queue.enqueue_platform(PlatformMessage(task_id="t", platform="docs"))
    queue.enqueue_aggregate(AggregateMessage(task_id="t", deadline=True))
    for request, target in zip(rec.requests, ("run_platform", "aggregate"), strict=True):
        http = request.task.http_request
        assert http.headers[SIGNATURE_HEADER].startswith("t=")
        verify_delivery(target, Headers(dict(http.headers)), http.body, queue.settings)
        other = "aggregate" if target == "run_platform" else "run_platform"
        with pytest.raises(Unauthorized, match="does not match the body and target"):
            verify_delivery(other, Headers(dict(http.headers)), http.body, queue.settings)
    # A deadline scheduled in an hour is signed from then: read early from the queue, refused.
    at = datetime.now(UTC) + timedelta(hours=1)
    queue.enqueue_aggregate(AggregateMessage(task_id="t2", deadline=True), at)
    http = rec.requests[-1].task.http_request
    with pytest.raises(Unauthorized, match="not valid yet"):
        verify_delivery("aggregate", Headers(dict(http.headers)), http.body, queue.settings)
    verify_delivery(
        "aggregate", Headers(dict(http.headers)), http.body, queue.settings, at.timestamp()
    )
    make_queue(host, emulator=True).enqueue_platform(PlatformMessage(task_id="u", platform="docs"))
    assert SIGNATURE_HEADER not in rec.requests[-1].task.http_request.headers  # no secret


def test_already_exists_is_success(recorder: tuple[Recorder, str]) -> None:
    rec, host = recorder
    queue = make_queue(host, emulator=False)
    message = PlatformMessage(task_id="t1", platform="docs")
    queue.enqueue_platform(message)
    queue.enqueue_platform(message)  # the server refuses the name: not an error for us
    queue.enqueue_aggregate(AggregateMessage(task_id="t1"))
    queue.enqueue_aggregate(AggregateMessage(task_id="t1"))
    assert len(rec.requests) == 4
    assert len(rec.names) == 2


def test_transient_failures_are_retried_under_the_same_name(
    recorder: tuple[Recorder, str],
) -> None:
    rec, host = recorder
    rec.fail_next = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE]
    make_queue(host, emulator=False).enqueue_platform(PlatformMessage(task_id="t", platform="docs"))
    assert len(rec.requests) == 3
    assert {r.task.name for r in rec.requests} == {f"{QUEUES}/fanfuse-docs/tasks/t--docs"}


def test_permanent_failures_raise(recorder: tuple[Recorder, str]) -> None:
    rec, host = recorder
    rec.fail_next = [grpc.StatusCode.NOT_FOUND]  # e.g. the queue does not exist
    with pytest.raises(exceptions.NotFound):
        make_queue(host, emulator=False).enqueue_platform(
            PlatformMessage(task_id="t", platform="docs")
        )
    assert len(rec.requests) == 1


def test_queue_prefix_and_dispatch_deadline_bounds(recorder: tuple[Recorder, str]) -> None:
    rec, host = recorder
    make_queue(
        host, emulator=False, queue_prefix="ff-prod", deadline_seconds=5000
    ).enqueue_platform(PlatformMessage(task_id="t", platform="docs"))
    make_queue(host, emulator=False, deadline_seconds=1).enqueue_platform(
        PlatformMessage(task_id="u", platform="docs")
    )
    long, short = (r.task for r in rec.requests)
    assert rec.requests[0].parent == f"{QUEUES}/ff-prod-docs"
    assert long.dispatch_deadline == timedelta(minutes=30)  # Cloud Tasks' maximum
    assert short.dispatch_deadline == timedelta(seconds=31)


def test_missing_function_url_is_a_clear_error(recorder: tuple[Recorder, str]) -> None:
    _, host = recorder
    queue = make_queue(host, emulator=False, function_urls={})
    with pytest.raises(ValueError, match="no URL for the run_platform function"):
        queue.enqueue_platform(PlatformMessage(task_id="t", platform="docs"))
