"""The SQS TaskQueue against moto's server on 127.0.0.1: names, signatures, delays, redrive."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from pydantic import SecretStr
from types_boto3_sqs.type_defs import MessageTypeDef

from fanfuse.auth.task_deliveries import SIGNATURE_HEADER, verify_delivery
from fanfuse.net.aws_clients import sqs_client
from fanfuse.queue.port import AggregateMessage, PlatformMessage, queue_id
from fanfuse.queue.sqs import (
    DUE_ATTRIBUTE,
    MAX_DELAY_SECONDS,
    SIGNATURE_ATTRIBUTE,
    SqsQueue,
    delay_seconds,
    ensure_queues,
)
from fanfuse.settings import Settings
from fanfuse.tools.devstack.moto_app import ThreadedMoto
from fanfuse.wire.errors import Unauthorized
from fanfuse.wire.models import utcnow

SECRET = "s3cret-for-tests"


@pytest.fixture
def sqs(moto_server: ThreadedMoto) -> Any:
    return sqs_client(Settings(aws_endpoint_url=moto_server.endpoint))


@pytest.fixture
def queue(sqs: Any) -> SqsQueue:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    ensure_queues(sqs, prefix, ["sec_edgar", "docs"], visibility_timeout=30, max_receives=3)
    settings = Settings(queue_prefix=prefix, tasks_hmac_secret=SecretStr(SECRET))
    return SqsQueue(settings, sqs)


def receive(queue: SqsQueue, name: str, wait: int = 0) -> list[MessageTypeDef]:
    answer = queue.client.receive_message(
        QueueUrl=queue.queue_url(name),
        MaxNumberOfMessages=10,
        WaitTimeSeconds=wait,
        MessageAttributeNames=["All"],
    )
    return list(answer.get("Messages", []))


def test_the_queues_have_dead_letter_queues_with_redrive(queue: SqsQueue) -> None:
    url = queue.queue_url("sec_edgar")
    assert url.endswith(queue_id(queue.settings.queue_prefix, "sec_edgar"))
    attributes = queue.client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    redrive = json.loads(attributes["Attributes"]["RedrivePolicy"])
    assert redrive["maxReceiveCount"] == 3
    assert redrive["deadLetterTargetArn"].endswith("-sec-edgar-dlq")
    assert attributes["Attributes"]["VisibilityTimeout"] == "30"


def test_a_platform_message_goes_to_its_platform_queue_signed(queue: SqsQueue) -> None:
    message = PlatformMessage(task_id="t1", platform="sec_edgar")
    queue.enqueue_platform(message)
    (received,) = receive(queue, "sec_edgar")
    assert received["Body"] == message.model_dump_json()
    signature = received["MessageAttributes"][SIGNATURE_ATTRIBUTE]["StringValue"]
    headers = {SIGNATURE_HEADER: signature}
    verify_delivery("run_platform", headers, received["Body"].encode(), queue.settings)
    with pytest.raises(Unauthorized, match="does not match the body and target"):
        verify_delivery("aggregate", headers, received["Body"].encode(), queue.settings)
    assert receive(queue, "docs") == []


def test_no_secret_no_signature(queue: SqsQueue) -> None:
    unsigned = SqsQueue(queue.settings.model_copy(update={"tasks_hmac_secret": None}), queue.client)
    unsigned.enqueue_aggregate(AggregateMessage(task_id="t2"))
    (received,) = receive(queue, "aggregate")
    assert SIGNATURE_ATTRIBUTE not in received.get("MessageAttributes", {})


def test_a_deadline_is_delayed_and_a_long_one_carries_its_due_time(queue: SqsQueue) -> None:
    soon = AggregateMessage(task_id="t3", deadline=True)
    queue.enqueue_aggregate(soon, utcnow() + timedelta(seconds=2))
    assert receive(queue, "aggregate") == []  # not yet visible
    (received,) = receive(queue, "aggregate", wait=5)
    assert json.loads(received["Body"]) == soon.model_dump()
    assert DUE_ATTRIBUTE not in received["MessageAttributes"]

    later = utcnow() + timedelta(hours=2)
    queue.enqueue_aggregate(AggregateMessage(task_id="t4", deadline=True), later)
    assert receive(queue, "aggregate") == []


@pytest.mark.parametrize(
    ("seconds", "expected_delay", "carries_due"),
    [
        (None, 0, False),
        (-5.0, 0, False),
        (0.2, 1, False),  # rounded up: never early
        (899.5, 900, False),
        (900.0, MAX_DELAY_SECONDS, False),
        (901.0, MAX_DELAY_SECONDS, True),
        (7200.0, MAX_DELAY_SECONDS, True),
    ],
)
def test_delay_seconds(seconds: float | None, expected_delay: int, carries_due: bool) -> None:
    now = utcnow()
    at = None if seconds is None else now + timedelta(seconds=seconds)
    delay, due = delay_seconds(at, now)
    assert delay == expected_delay
    assert (due == at) if carries_due else due is None


def test_redeliver_sends_the_same_body_with_the_due_time(queue: SqsQueue) -> None:
    body = AggregateMessage(task_id="t5", deadline=True).model_dump_json()
    url = queue.queue_url("aggregate")
    arn = queue.client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    queue.redeliver(arn, body, utcnow() + timedelta(seconds=1), "aggregate")
    (received,) = receive(queue, "aggregate", wait=5)
    assert received["Body"] == body
    headers = {SIGNATURE_HEADER: received["MessageAttributes"][SIGNATURE_ATTRIBUTE]["StringValue"]}
    verify_delivery("aggregate", headers, body.encode(), queue.settings)


def test_retry_in_makes_a_message_visible_again_early(queue: SqsQueue) -> None:
    queue.enqueue_platform(PlatformMessage(task_id="t6", platform="docs"))
    (received,) = receive(queue, "docs")
    assert receive(queue, "docs") == []  # invisible for the queue's 30 s
    arn = queue.client.get_queue_attributes(
        QueueUrl=queue.queue_url("docs"), AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    queue.retry_in(arn, received["ReceiptHandle"], 0.5)
    (again,) = receive(queue, "docs", wait=5)
    assert again["MessageId"] == received["MessageId"]
