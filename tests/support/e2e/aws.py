"""The AWS stack of the end-to-end tests: moto's server, the Lambda handlers' local process.

`AwsCloud` is what `Runtime` asks of a stack, on AWS: the public API over the local function-URL
front; deliveries as an event source mapping makes them (an SQS record, signed as the queue
signs it, handed to the handler's `front.verdict` in this process, as the dispatcher does, so
the test sees the delivery's verdict, not only the batch response, written as the HTTP answer
the Cloud Functions front gives for it); documents read straight from
the DynamoDB table; a queue held by the dispatcher (`AwsStack.pause`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import httpx

from fanfuse.fronts import functions
from fanfuse.fronts.aws_lambda import front
from fanfuse.net.aws_clients import dynamodb_client
from fanfuse.queue.port import AGGREGATE_QUEUE, queue_id
from fanfuse.queue.sqs import SIGNATURE_ATTRIBUTE, SqsQueue
from fanfuse.runtimes import cloud
from fanfuse.settings import Settings
from fanfuse.store import dynamodb_codec as codec
from fanfuse.store.dynamodb import DynamoStore
from fanfuse.tools.devstack.aws_stack import AwsAddresses, AwsStack, LambdaHost
from fanfuse.wire.models import PlatformRun, Task
from tests.support.e2e.cloud import Runtime


@dataclass
class AwsCloud(Runtime):
    """The AWS stack: moto (DynamoDB, SQS) and the handlers' process (front and dispatcher)."""

    stack: AwsStack = field(kw_only=True)
    addresses: AwsAddresses = field(kw_only=True)
    short_start: LambdaHost = field(kw_only=True)
    settings: Settings = field(init=False)
    dynamo_store: DynamoStore = field(init=False)

    def __post_init__(self) -> None:
        # The handlers' own settings, read from their environment as a Lambda reads its own.
        with mock.patch.dict(os.environ, self.stack.env):
            self.settings = Settings()
        self.dynamo_store = DynamoStore(dynamodb_client(self.settings), self.addresses.table)

    @property
    def store(self) -> DynamoStore:
        return self.dynamo_store

    def url(self, target: str) -> str:
        return self.addresses.functions[target]

    def short_start_url(self) -> str:
        return f"{self.short_start.url}/start_search"

    @property
    def tasks_secret(self) -> str:
        assert self.addresses.tasks_secret is not None
        return self.addresses.tasks_secret

    def reset(self) -> None:
        self.stack.reset()

    # -- as the event source mapping would -----------------------------------------------------

    def deliver(
        self,
        target: str,
        body: Any,
        *,
        from_cloud_tasks: bool = True,
        signed: bool = True,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """`body` as an SQS record of its queue, run through the handler's `front.verdict` in
        this process (the Lambda handlers' settings), and the verdict as the HTTP answer Cloud
        Tasks would read (`functions.verdict_response`); `headers` do not apply to a record."""
        assert from_cloud_tasks and not headers, "an SQS record is always the queue's"
        content = body if isinstance(body, str) else json.dumps(body)
        attributes = {}
        if signed:
            signature = self.signature(target, content.encode())
            attributes[SIGNATURE_ATTRIBUTE] = {"stringValue": signature, "dataType": "String"}
        message = json.loads(content)
        # a fallback member's task comes from that member's queue (queue/port.py)
        name = (
            AGGREGATE_QUEUE
            if target == "aggregate"
            else message.get("member") or message["platform"]
        )
        queue = queue_id(self.addresses.queue_prefix, name)
        record = {
            "messageId": f"manual-{time.monotonic_ns()}",
            "receiptHandle": "manual",
            "body": content,
            "messageAttributes": attributes,
            "eventSource": "aws:sqs",
            "eventSourceARN": f"arn:aws:sqs:{self.addresses.region}:123456789012:{queue}",
        }
        self._use_aws_handlers()
        answer = functions.verdict_response(front.verdict(target, record))
        return httpx.Response(
            answer.status_code, headers=dict(answer.headers), content=answer.get_data()
        )

    def _use_aws_handlers(self) -> None:
        """This process's cloud runtime wired as the Lambda handlers' (settings, service)."""
        if cloud._settings is not self.settings:
            cloud._settings = self.settings
            cloud._service = cloud._authenticator = None
            front._queue = SqsQueue(self.settings)

    def pause(self, platform: str) -> None:
        self.stack.pause(platform)

    # -- DynamoDB, read straight ---------------------------------------------------------------

    def _item(self, path: str) -> dict[str, Any] | None:
        parts = path.split("/")
        sort_key = codec.TASK_SK if len(parts) == 2 else codec.run_sk(parts[3])
        got = self.store.client.get_item(
            TableName=self.addresses.table,
            Key=codec.key(codec.task_pk(parts[1]), sort_key),
            ConsistentRead=True,
        )
        return got.get("Item")

    def stamp(self, path: str) -> object:
        return self._item(path)  # the whole item, version included

    def task_doc(self, task_id: str) -> dict[str, Any]:
        stored = self._item(f"searches/{task_id}")
        assert stored is not None, f"no task item {task_id}"
        return codec.model_of(stored, Task).model_dump()

    def platform_doc(self, task_id: str, name: str) -> dict[str, Any]:
        """The run as stored, and its `expires_at`: the item's TTL attribute (whole seconds)."""
        stored = self._item(f"searches/{task_id}/platforms/{name}")
        assert stored is not None
        expires = datetime.fromtimestamp(int(stored[codec.TTL_ATTRIBUTE]["N"]), UTC)
        return {**codec.model_of(stored, PlatformRun).model_dump(), "expires_at": expires}
