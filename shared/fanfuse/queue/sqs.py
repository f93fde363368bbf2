"""The AWS TaskQueue: SQS standard queues, consumed by the worker and aggregator Lambdas.

- One queue per platform and one for aggregation, named as the Cloud Tasks ones are
  (`queue_id`: `{queue_prefix}-{platform, _ as -}`, `{queue_prefix}-aggregate`), so a platform's
  Lambda concurrency (its event source mapping) is the provider's quota, and `ensure_queues`
  (the local stack) creates the same queues Terraform does (infra/aws/queues.tf), each with a
  dead-letter queue that takes a message after `max_receives` failed deliveries.
- The body is the message's JSON, byte for byte what a Cloud Task carries, signed the same way
  (`fanfuse.auth.task_deliveries.sign`, HMAC-SHA256 with FANFUSE_TASKS_HMAC_SECRET, over the target,
  the body and a validity window from the time SQS makes the message visible) in the message
  attribute `signature`: anyone who may send to a queue could otherwise run any platform of any
  search, or cut one short with a forged deadline. The handler checks it like a task target
  checks `X-Fanfuse-Signature` (`fanfuse.fronts.aws_lambda.front`).
- Its other attributes are the carrier of `fanfuse.tracing.delivery` (the trace, the moment it
  was enqueued), which the Lambda front hands on as the delivery's headers.
- No deduplication here: standard queues deliver at least once and a second enqueue is a second
  message; the store's rules (claim, lease, count once, finalize once) make either harmless.
- The deadline task uses `DelaySeconds`, which SQS caps at 15 minutes. A later one carries its
  due time in the attribute `due_at` and is sent again by its consumer (`redeliver`), 15 minutes
  at a time, until it is due.

The client is made from settings (FANFUSE_AWS_ENDPOINT_URL: moto locally) on first use.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pydantic import BaseModel

from fanfuse.auth.task_deliveries import hmac_secret, signature_for
from fanfuse.queue.port import (
    AGGREGATE_QUEUE,
    AggregateMessage,
    PlatformMessage,
    TaskQueue,
    concurrently,
    queue_id,
)
from fanfuse.settings import Settings
from fanfuse.tracing import delivery
from fanfuse.wire.models import utcnow

if TYPE_CHECKING:
    from types_boto3_sqs import SQSClient
    from types_boto3_sqs.type_defs import MessageAttributeValueTypeDef

log = logging.getLogger(__name__)

MAX_DELAY_SECONDS = 900
"""SQS's cap on DelaySeconds (15 minutes)."""
SIGNATURE_ATTRIBUTE = "signature"
DUE_ATTRIBUTE = "due_at"
DLQ_SUFFIX = "-dlq"
DLQ_RETENTION_SECONDS = 14 * 24 * 3600
"""The longest SQS keeps a message: time to look at what failed."""


def delay_seconds(at: datetime | None, now: datetime) -> tuple[int, datetime | None]:
    """(DelaySeconds, due time to carry) for a message due at `at`: the delay, rounded up so it
    is never early, capped at SQS's 15 minutes; the due time only when the cap cut it short."""
    if at is None:
        return 0, None
    wait = math.ceil((at - now).total_seconds())
    if wait <= 0:
        return 0, None
    if wait <= MAX_DELAY_SECONDS:
        return wait, None
    return MAX_DELAY_SECONDS, at


def string_attribute(value: str) -> MessageAttributeValueTypeDef:
    return {"DataType": "String", "StringValue": value}


class SqsQueue(TaskQueue):
    """TaskQueue on SQS; `client` defaults to one made from settings (moto's, locally)."""

    def __init__(self, settings: Settings, client: SQSClient | None = None) -> None:
        self.settings = settings
        self._client = client
        self._urls: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def client(self) -> SQSClient:
        with self._lock:
            if self._client is None:
                from fanfuse.net.aws_clients import sqs_client

                self._client = sqs_client(self.settings)
            return self._client

    def queue_url(self, name: str) -> str:
        """URL of the queue of platform `name` (or "aggregate")."""
        return self.url_of_queue(queue_id(self.settings.queue_prefix, name))

    def url_of_queue(self, queue: str) -> str:
        """URL of the queue named `queue`, looked up once per process."""
        url = self._urls.get(queue)
        if url is None:
            url = self.client.get_queue_url(QueueName=queue)["QueueUrl"]
            self._urls[queue] = url
        return url

    # -- TaskQueue ----------------------------------------------------------------------------

    def enqueue_platform(self, message: PlatformMessage) -> None:
        self.send(self.queue_url(message.queue), message, None)

    def enqueue_platforms(self, messages: Sequence[PlatformMessage]) -> None:
        concurrently(self, messages)  # one SendMessage round trip each, at once

    def enqueue_aggregate(self, message: AggregateMessage, at: datetime | None = None) -> None:
        self.send(self.queue_url(AGGREGATE_QUEUE), message, at)

    def send(self, url: str, message: BaseModel, at: datetime | None) -> None:
        target = "aggregate" if isinstance(message, AggregateMessage) else "run_platform"
        self.send_body(
            url, message.model_dump_json(), at, target, getattr(message, "platform", None)
        )

    def send_body(
        self, url: str, body: str, at: datetime | None, target: str, platform: str | None = None
    ) -> None:
        """Send `body` for `target` signed, delayed until `at` (15 minutes at most per hop, see
        module); the signature is valid from the moment this hop becomes visible."""
        now = utcnow()
        delay, due = delay_seconds(at, now)
        attributes: dict[str, MessageAttributeValueTypeDef] = {}
        secret = hmac_secret(self.settings)
        if secret is not None:
            visible = now + timedelta(seconds=delay)
            signature = signature_for(target, body.encode(), secret, self.settings, visible)
            attributes[SIGNATURE_ATTRIBUTE] = string_attribute(signature)
        if due is not None:
            attributes[DUE_ATTRIBUTE] = string_attribute(due.isoformat())
        for name, value in delivery.outbound(target, platform, now).items():  # trace, enqueued
            attributes[name] = string_attribute(value)
        self.client.send_message(
            QueueUrl=url, MessageBody=body, DelaySeconds=delay, MessageAttributes=attributes
        )

    # -- what a consumer asks of the queue ------------------------------------------------------

    def url_of_arn(self, arn: str) -> str:
        """The URL of the queue an event source ARN (`arn:aws:sqs:REGION:ACCOUNT:NAME`) names."""
        return self.url_of_queue(arn.rsplit(":", 1)[-1])

    def redeliver(self, arn: str, body: str, due: datetime, target: str = "aggregate") -> None:
        """Send a not-yet-due message again, on the queue it came from, for the next hop."""
        self.send_body(self.url_of_arn(arn), body, due, target)

    def retry_in(self, arn: str, receipt_handle: str, seconds: float) -> None:
        """Make a received message visible again in `seconds` (a lease's Retry-After), instead
        of after the queue's whole visibility timeout."""
        timeout = min(max(0, math.ceil(seconds)), 12 * 3600)
        self.client.change_message_visibility(
            QueueUrl=self.url_of_arn(arn), ReceiptHandle=receipt_handle, VisibilityTimeout=timeout
        )


def queue_arn(client: SQSClient, url: str) -> str:
    """The ARN of the queue at `url` (what a redrive policy and an event source name)."""
    return client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]


def ensure_queues(
    client: SQSClient,
    prefix: str,
    names: Iterable[str],
    *,
    visibility_timeout: int,
    max_receives: int,
) -> dict[str, str]:
    """Create the queues of these platforms and the aggregate queue, each with its dead-letter
    queue and redrive policy; {platform or "aggregate": queue URL}. Idempotent (SQS returns the
    existing queue when the attributes agree), as Terraform's would be."""
    urls: dict[str, str] = {}
    for name in dict.fromkeys([*names, AGGREGATE_QUEUE]):
        queue = queue_id(prefix, name)
        dlq_url = client.create_queue(
            QueueName=queue + DLQ_SUFFIX,
            Attributes={"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS)},
        )["QueueUrl"]
        redrive = json.dumps(
            {"deadLetterTargetArn": queue_arn(client, dlq_url), "maxReceiveCount": max_receives}
        )
        urls[name] = client.create_queue(
            QueueName=queue,
            Attributes={"VisibilityTimeout": str(visibility_timeout), "RedrivePolicy": redrive},
        )["QueueUrl"]
    return urls
