"""The Lambda handlers (`fanfuse.fronts.aws_lambda.front`) over the Cloud Functions' targets, with
SQS on moto.

The targets' own rules are tested in tests/unit/runtimes/test_cloud_wrappers.py; this pins what the
Lambda adapters add: a function-URL event reaches the right public target and comes back as
`{statusCode, headers, body}`, and an SQS record's outcome becomes a partial batch response
(acknowledged, retried after the lease's Retry-After, retried after the visibility timeout) or
the next hop of a deadline longer than SQS's 15 minutes.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from fanfuse.auth import keys
from fanfuse.fronts.aws_lambda import front
from fanfuse.net.aws_clients import sqs_client
from fanfuse.platforms import Registry
from fanfuse.queue.port import AggregateMessage, PlatformMessage
from fanfuse.queue.sqs import DUE_ATTRIBUTE, SIGNATURE_ATTRIBUTE, SqsQueue, ensure_queues
from fanfuse.runtimes import cloud
from fanfuse.service.catalog import Catalog
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tools.devstack.moto_app import ThreadedMoto
from fanfuse.wire.errors import LeaseHeld, QueueUnavailable, UnknownPlatform
from fanfuse.wire.models import TaskView, utcnow
from tests.support.fakes import task_view

SECRET = "front-tests"
KEY, RECORD = keys.new_key("alice", "", 5, None, utcnow())


class FakeService:
    """What the targets call, answering `outcome` (or raising it) for every delivery."""

    def __init__(self, settings: Settings, outcome: str | Exception = "succeeded") -> None:
        self.settings = settings
        self.store = SqliteStore(":memory:")
        self.store.put_key(RECORD)
        self.outcome = outcome
        self.delivered: list[Any] = []
        # what `{search_status URL}/openapi.json` reads: the deployment's platforms
        self.catalog = Catalog(self.store, Registry.from_settings(settings), settings)

    def status(self, task_id: str) -> TaskView:
        return task_view(task_id, "key:alice")

    def available(self) -> list[str]:
        return ["docs"]

    def _answer(self, message: Any) -> str:
        self.delivered.append(message)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome

    async def run_platform(self, message: PlatformMessage) -> str:
        return self._answer(message)

    async def aggregate(self, message: AggregateMessage) -> str:
        return self._answer(message)


@pytest.fixture
def settings(moto_server: ThreadedMoto) -> Iterator[Settings]:
    config = Settings(
        cloud="aws",
        aws_endpoint_url=moto_server.endpoint,
        queue_prefix=f"f{uuid.uuid4().hex[:8]}",
        tasks_hmac_secret=SecretStr(SECRET),
    )
    ensure_queues(
        sqs_client(config),
        config.queue_prefix,
        ["docs"],
        visibility_timeout=30,
        max_receives=3,
    )
    cloud._settings = config
    front._queue = SqsQueue(config)
    yield config
    cloud._settings = cloud._service = cloud._authenticator = None
    front._queue = None


def serve(settings: Settings, outcome: str | Exception = "succeeded") -> FakeService:
    service = FakeService(settings, outcome)
    # a double with the service's methods the targets call, not a SearchService
    cloud._service = service  # type: ignore[assignment]
    return service


def url_event(
    method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"host": "abc.lambda-url.us-east-1.on.aws", **(headers or {})},
        "requestContext": {
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
            }
        },
        "body": base64.b64encode(body).decode(),
        "isBase64Encoded": True,
    }


@pytest.mark.parametrize(
    ("method", "path", "headers", "status", "error"),
    [
        ("GET", "/search_status/t1", {keys.API_KEY_HEADER: KEY}, 200, None),
        ("GET", "/search_status/t1", {}, 401, "unauthorized"),
        ("PUT", "/start_search", {}, 405, "method_not_allowed"),
        ("GET", "/run_platform", {}, 404, "not_found"),  # task targets have no URL
        ("GET", "/nowhere/at/all", {}, 404, "not_found"),
    ],
)
def test_a_function_url_event_reaches_the_public_target(
    settings: Settings,
    method: str,
    path: str,
    headers: dict[str, str],
    status: int,
    error: str | None,
) -> None:
    serve(settings)
    answer = front.http(url_event(method, path, headers=headers), None)
    assert answer["statusCode"] == status, answer
    body = json.loads(answer["body"])
    assert body.get("error") == error
    if status == 200:
        assert body["task_id"] == "t1"
    if status == 405:
        assert answer["headers"]["allow"] == "POST"  # format 2.0: lower case


def test_the_openapi_document_needs_no_credential(settings: Settings) -> None:
    answer = front.http(url_event("GET", "/search_status/openapi.json"), None)
    assert answer["statusCode"] == 200 and json.loads(answer["body"])["openapi"]


def test_a_trace_header_of_thousands_of_digits_is_no_500_on_lambda(settings: Settings) -> None:
    """Issue 29, item 3, at the Lambda: the public targets behind apig-wsgi read the trace
    header with bounded digits, inside their error handling (tests/unit/fronts/test_trace_headers.py
    has the other fronts)."""
    serve(settings)
    hostile = {"x-cloud-trace-context": f"{'a' * 32}/{'9' * 4_400};o=1"}
    document = front.http(url_event("GET", "/search_status/openapi.json", headers=hostile), None)
    assert document["statusCode"] == 200 and json.loads(document["body"])["openapi"]
    status = front.http(
        url_event("GET", "/search_status/t1", headers={**hostile, keys.API_KEY_HEADER: KEY}), None
    )
    assert status["statusCode"] == 200 and json.loads(status["body"])["task_id"] == "t1"


# -- the IAM principal of a SigV4-signed call, as API Gateway hands it over ---------------------

BACKEND_ARN = "arn:aws:iam::123456789012:user/backend"
OTHER_ARN = "arn:aws:sts::123456789012:assumed-role/other-app/session-1"
START = json.dumps({"query": "microwave", "platform": "docs"}).encode()


def iam_event(method: str, path: str, arn: str, body: bytes = b"") -> dict[str, Any]:
    """An API Gateway HTTP API event (payload format 2.0) behind an AWS_IAM route: the request
    as the client signed it (its SigV4 `Authorization`), the principal the gateway verified in
    `requestContext.authorizer.iam`."""
    event = url_event(
        method,
        path,
        body,
        {
            "host": "abc123.execute-api.us-east-1.amazonaws.com",
            "content-type": "application/json",
            "authorization": "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20260101/us-east-1/"
            "execute-api/aws4_request, SignedHeaders=host;x-amz-date, Signature=0f",
            "x-amz-date": "20260101T000000Z",
        },
    )
    event["routeKey"] = "ANY /{target}/{proxy+}" if path.count("/") > 1 else "ANY /{target}"
    event["requestContext"].update(
        accountId="123456789012",
        apiId="abc123",
        domainName="abc123.execute-api.us-east-1.amazonaws.com",
        requestId=uuid.uuid4().hex,
        routeKey=event["routeKey"],
        stage="$default",
        authorizer={
            "iam": {
                "accessKey": "AKIAEXAMPLE",
                "accountId": "123456789012",
                "callerId": "AIDAEXAMPLE",
                "cognitoIdentity": None,
                "principalOrgId": None,
                "userArn": arn,
                "userId": "AIDAEXAMPLE",
            }
        },
    )
    return event


def on_moto(aws_settings: Settings, trust: bool) -> Settings:
    """The real service (DynamoDB and SQS on moto) behind the Lambda front, configured as
    infra/aws configures it for `api_access` "iam" (trust) or not."""
    config = aws_settings.model_copy(
        update={
            "cloud": "aws",
            "queue_prefix": f"i{uuid.uuid4().hex[:8]}",
            "deployed_platforms": ["docs"],
            "tasks_hmac_secret": SecretStr(SECRET),
            "trust_iam_authorizer": trust,
        }
    )
    ensure_queues(
        sqs_client(config), config.queue_prefix, ["docs"], visibility_timeout=30, max_receives=3
    )
    cloud._settings = config
    cloud._service = cloud._authenticator = None
    return config


@pytest.fixture
def lambda_on_moto() -> Iterator[None]:
    yield
    cloud._settings = cloud._service = cloud._authenticator = None


@pytest.mark.usefixtures("lambda_on_moto")
def test_an_iam_authorized_event_starts_a_search_owned_by_its_principal(
    aws_settings: Settings,
) -> None:
    on_moto(aws_settings, trust=True)
    answer = front.http(iam_event("POST", "/start_search", BACKEND_ARN, START), None)
    assert answer["statusCode"] == 202, answer
    task_id = json.loads(answer["body"])["task_id"]
    status = front.http(iam_event("GET", f"/search_status/{task_id}", BACKEND_ARN), None)
    assert status["statusCode"] == 200, status
    assert json.loads(status["body"])["owner"] == f"aws:{BACKEND_ARN}"
    assert cloud.service().store.count_in_flight(f"aws:{BACKEND_ARN}", utcnow()) == 1
    # Another principal of the same account neither sees nor cancels it.
    other = front.http(iam_event("GET", f"/search_status/{task_id}", OTHER_ARN), None)
    assert other["statusCode"] == 404, other
    cancel = json.dumps({"task_id": task_id}).encode()
    refused = front.http(iam_event("POST", "/cancel_search", OTHER_ARN, cancel), None)
    assert refused["statusCode"] == 404, refused
    cancelled = front.http(iam_event("POST", "/cancel_search", BACKEND_ARN, cancel), None)
    assert cancelled["statusCode"] == 200, cancelled
    assert json.loads(cancelled["body"])["status"] == "cancelled"


@pytest.mark.usefixtures("lambda_on_moto")
def test_without_the_trust_setting_the_iam_identity_is_not_a_credential(
    aws_settings: Settings,
) -> None:
    on_moto(aws_settings, trust=False)
    answer = front.http(iam_event("POST", "/start_search", BACKEND_ARN, START), None)
    assert answer["statusCode"] == 401, answer
    assert json.loads(answer["body"])["error"] == "unauthorized"
    # The SigV4 `Authorization` is then read as what it is not: never a caller.
    assert "Bearer" in json.loads(answer["body"])["message"]


def sent(queue: SqsQueue, name: str, message: Any, at: Any = None) -> dict[str, Any]:
    """Enqueue `message`, receive it back as the event source mapping's record."""
    url = queue.queue_url(name)
    queue.send(url, message, at)
    received = queue.client.receive_message(
        QueueUrl=url, MessageAttributeNames=["All"], WaitTimeSeconds=2
    )["Messages"]
    from fanfuse.fronts.aws_lambda.local import sqs_record

    arn = queue.client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return sqs_record(received[0], arn["Attributes"]["QueueArn"], "us-east-1")


MESSAGE = PlatformMessage(task_id="t1", platform="docs")


@pytest.mark.parametrize(
    ("outcome", "retried"),
    [
        ("succeeded", False),
        ("noop", False),
        (UnknownPlatform("docs"), False),  # permanent: acknowledged, logged
        (QueueUnavailable("down"), True),  # infrastructure: SQS delivers it again
        (RuntimeError("bug"), True),
    ],
)
def test_a_worker_record_is_acknowledged_or_left_for_sqs(
    settings: Settings, outcome: str | Exception, retried: bool
) -> None:
    service = serve(settings, outcome)
    record = sent(front.queue(), "docs", MESSAGE)
    result = front.worker({"Records": [record]}, None)
    failures = [{"itemIdentifier": record["messageId"]}] if retried else []
    assert result == {"batchItemFailures": failures}
    assert service.delivered == [MESSAGE]


def test_an_unsigned_or_forged_record_touches_nothing_and_is_retried(settings: Settings) -> None:
    service = serve(settings)
    record = sent(front.queue(), "docs", MESSAGE)
    forged = {**record, "body": record["body"].replace("t1", "t2")}
    unsigned = {**record, "messageId": "m-unsigned", "messageAttributes": {}}
    result = front.worker({"Records": [forged, unsigned]}, None)
    assert result["batchItemFailures"] == [
        {"itemIdentifier": record["messageId"]},
        {"itemIdentifier": "m-unsigned"},
    ]
    assert service.delivered == []


def test_a_held_lease_makes_the_message_visible_after_its_retry_after(settings: Settings) -> None:
    serve(settings, LeaseHeld("held", retry_after_s=1.2))
    queue = front.queue()
    record = sent(queue, "docs", MESSAGE)
    result = front.worker({"Records": [record]}, None)
    assert result["batchItemFailures"] == [{"itemIdentifier": record["messageId"]}]
    # Visible again after 2 s (Retry-After, rounded up), not after the queue's 30 s.
    again = queue.client.receive_message(QueueUrl=queue.queue_url("docs"), WaitTimeSeconds=5)
    assert again["Messages"][0]["MessageId"] == record["messageId"]


def test_a_deadline_not_yet_due_is_sent_on_and_acknowledged(settings: Settings) -> None:
    service = serve(settings)
    queue = front.queue()
    deadline = AggregateMessage(task_id="t1", deadline=True)
    record = sent(queue, "aggregate", deadline)
    due = utcnow() + timedelta(hours=1)
    record["messageAttributes"][DUE_ATTRIBUTE] = {"stringValue": due.isoformat()}
    assert front.aggregator({"Records": [record]}, None) == {"batchItemFailures": []}
    assert service.delivered == []  # not run before it is due
    url = queue.queue_url("aggregate")
    attributes = queue.client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    assert attributes["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"
    # A forged one is not laundered into a signed next hop.
    forged = {**record, "messageAttributes": {DUE_ATTRIBUTE: {"stringValue": due.isoformat()}}}
    forged["messageId"] = "m-forged"
    result = front.aggregator({"Records": [forged]}, None)
    assert result["batchItemFailures"] == [{"itemIdentifier": "m-forged"}]
    assert SIGNATURE_ATTRIBUTE in record["messageAttributes"]


def test_a_due_deadline_runs_the_aggregate_target(settings: Settings) -> None:
    service = serve(settings, "completed")
    deadline = AggregateMessage(task_id="t1", deadline=True)
    record = sent(front.queue(), "aggregate", deadline)
    past = (utcnow() - timedelta(seconds=1)).isoformat()
    record["messageAttributes"][DUE_ATTRIBUTE] = {"stringValue": past}
    assert front.aggregator({"Records": [record]}, None) == {"batchItemFailures": []}
    assert service.delivered == [deadline]


LAMBDA_IMPORT = """
import sys
for name in ("google", "functions_framework", "starlette", "uvicorn", "moto", "torch"):
    sys.modules[name] = None  # importing any of them fails
sys.path.insert(0, "functions")
import aws_lambda
assert callable(aws_lambda.http) and callable(aws_lambda.worker) and callable(aws_lambda.aggregator)
"""


def test_the_lambda_entry_needs_no_google_client_functions_framework_or_model() -> None:
    """What the `lambda` extra installs is enough to load the three handlers."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "FANFUSE_CLOUD": "aws"}
    done = subprocess.run(
        [sys.executable, "-c", LAMBDA_IMPORT], cwd=root, env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    wrong = subprocess.run(
        [sys.executable, "-c", LAMBDA_IMPORT],
        cwd=root,
        env={**env, "FANFUSE_CLOUD": "gcp"},
        capture_output=True,
        timeout=60,
    )
    assert b"set FANFUSE_CLOUD=aws" in wrong.stderr
