"""What runs the Lambda handlers locally, since moto cannot run Lambda code without Docker.

`python -m fanfuse.fronts.aws_lambda.local --port N` (one process of `fanfuse dev --cloud aws`,
started and stopped by `devstack.aws_stack`) runs, with the stack's settings in its environment:

- a local HTTP front on 127.0.0.1: each request becomes a function-URL event (payload format
  2.0, the body base64-encoded as Lambda does for any body it does not know to be text) and is
  handed to `front.http` in this process; its `{statusCode, headers, body}` becomes the answer;
- a dispatcher that long-polls every queue (each deployed platform's and the aggregate one), as
  an event source mapping does, and invokes `front.worker` / `front.aggregator` with one record
  per invocation (the mapping's batch size in infra/aws, so one slow platform run never holds
  another search's message), as many invocations at a time per queue as the mapping allows
  (`POLLERS`); it deletes what the handler did not report in `batchItemFailures` and leaves the
  rest for SQS to deliver again.

Every poll is bounded (WaitTimeSeconds) and the pollers stop with the process.
"""

from __future__ import annotations

import argparse
import base64
import logging
import signal
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from fanfuse.fronts.aws_lambda import front
from fanfuse.queue.port import AGGREGATE_QUEUE
from fanfuse.queue.sqs import SqsQueue, queue_arn
from fanfuse.tracing import spans

if TYPE_CHECKING:
    from types_boto3_sqs import SQSClient
    from types_boto3_sqs.type_defs import MessageTypeDef

    from fanfuse.settings import Settings

log = logging.getLogger(__name__)

PLATFORM_POLLERS = 5
"""Concurrent worker invocations per platform queue: the platform mappings' maximum_concurrency
in infra/aws (variable platform_concurrency's default; tests/infra/test_terraform_aws.py checks
they agree)."""
AGGREGATE_POLLERS = 5
"""Concurrent aggregator invocations: the aggregate mapping sets no maximum, so Lambda scales it
itself, from "five batches at a time with five concurrent invocations" (AWS Lambda, "Configuring
scaling behavior for SQS event source mappings") up to the function's reserved concurrency. Five
is where it starts, and the aggregate queue's deliveries are quick: a search's fan-in finds it
final (the worker finalized it), a deadline finds it final or times out its stragglers."""
WAIT_SECONDS = 1
"""Long-poll wait: short, so the pollers notice a stop within about a second."""


# ---------------------------------------------------------------------------------------------
# The HTTP front


def function_url_event(request: Request) -> dict[str, Any]:
    """The event a Lambda function URL would send for `request` (payload format 2.0)."""
    headers: dict[str, str] = {}
    for key, value in request.headers.items():
        name = key.lower()
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    body = request.get_data()
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": request.path,
        "rawQueryString": request.query_string.decode("latin-1"),
        "headers": headers,
        "requestContext": {
            "domainName": request.host,
            "requestId": uuid.uuid4().hex,
            "timeEpoch": int(time.time() * 1000),
            "http": {
                "method": request.method,
                "path": request.path,
                "protocol": request.environ.get("SERVER_PROTOCOL", "HTTP/1.1"),
                "sourceIp": request.remote_addr or "127.0.0.1",
                "userAgent": request.user_agent.string,
            },
        },
        "body": base64.b64encode(body).decode() if body else None,
        "isBase64Encoded": bool(body),
    }


def answer_of(result: dict[str, Any]) -> Response:
    """A handler's `{statusCode, headers, body, isBase64Encoded}` as an HTTP answer."""
    raw = result.get("body") or ""
    body = base64.b64decode(raw) if result.get("isBase64Encoded") else raw.encode()
    return Response(body, status=result["statusCode"], headers=result.get("headers") or {})


@Request.application  # type: ignore[arg-type]
def http_front(request: Request) -> Response:
    return answer_of(front.http(function_url_event(request), None))


# ---------------------------------------------------------------------------------------------
# The dispatcher


def sqs_record(message: MessageTypeDef, arn: str, region: str) -> dict[str, Any]:
    """The record an event source mapping hands Lambda for a received `message`."""
    attributes: dict[str, dict[str, Any]] = {
        name: {
            "stringValue": value.get("StringValue"),
            "dataType": value["DataType"],
            "stringListValues": [],
            "binaryListValues": [],
        }
        for name, value in message.get("MessageAttributes", {}).items()
    }
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": attributes,
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": region,
    }


class Dispatcher:
    """Long-polls each queue and invokes its handler, as the event source mappings would."""

    def __init__(
        self,
        client: SQSClient,
        settings: Settings,
        platforms: Iterable[str],
        paused: Path | None = None,
    ) -> None:
        self.client = client
        self.settings = settings
        self.platforms = list(platforms)
        self.paused = paused
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []

    def is_paused(self, name: str) -> bool:
        """A queue is held while a file of its platform's name exists in `paused` (the local
        stack's stand-in for pausing a queue: tests deliver such a platform themselves)."""
        return self.paused is not None and (self.paused / name).exists()

    def queues(self) -> Iterator[tuple[str, front.LambdaHandler, int]]:
        """Each queue, its handler, and how many invocations it runs at once."""
        for name in self.platforms:
            yield name, front.worker, PLATFORM_POLLERS
        yield AGGREGATE_QUEUE, front.aggregator, AGGREGATE_POLLERS

    def start(self) -> None:
        sqs = SqsQueue(self.settings, self.client)
        for name, handler, pollers in self.queues():
            url = sqs.queue_url(name)
            arn = queue_arn(self.client, url)
            for i in range(pollers):
                thread = threading.Thread(
                    target=self.poll, args=(name, url, arn, handler), name=f"poll-{name}-{i}"
                )
                thread.daemon = True
                thread.start()
                self.threads.append(thread)

    def poll(self, name: str, url: str, arn: str, handler: front.LambdaHandler) -> None:
        while not self.stopping.is_set():
            try:
                if self.is_paused(name):
                    self.stopping.wait(WAIT_SECONDS / 4)
                else:
                    self.poll_once(name, url, arn, handler)
            except Exception:
                log.exception("polling %s failed", url)
                self.stopping.wait(1.0)

    def poll_once(self, name: str, url: str, arn: str, handler: front.LambdaHandler) -> int:
        """One receive and its invocation; the number of messages invoked. Its own SQS calls are
        no spans: on Lambda they are the event source mapping's, not the function's."""
        with spans.untraced():
            received = self.client.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=1,
                WaitTimeSeconds=WAIT_SECONDS,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
        if not received:
            return 0
        if self.is_paused(name):  # paused during the long poll: put it back
            for message in received:
                self.client.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
            return 0
        records = [sqs_record(m, arn, self.settings.aws_region) for m in received]
        result = handler({"Records": records}, None)
        failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        for message in received:
            if message["MessageId"] not in failed:
                with spans.untraced():
                    self.client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return len(received)

    def stop(self, timeout: float = 5.0) -> None:
        self.stopping.set()
        end = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, end - time.monotonic()))


# ---------------------------------------------------------------------------------------------
# The process


def main(argv: list[str] | None = None) -> None:
    from fanfuse.net.aws_clients import sqs_client
    from fanfuse.runtimes import cloud
    from fanfuse.tracing import setup as tracing

    parser = argparse.ArgumentParser(prog="python -m fanfuse.fronts.aws_lambda.local")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--http-only", action="store_true", help="no queue dispatcher")
    parser.add_argument("--paused", type=Path, help="a queue is held while DIR/<platform> exists")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    tracing.configure()  # as functions/aws_lambda.py does on Lambda
    settings = cloud.settings()
    if settings.cloud != "aws":
        raise SystemExit(
            "python -m fanfuse.fronts.aws_lambda.local runs the AWS handlers: set FANFUSE_CLOUD=aws"
        )
    client = sqs_client(settings, read_timeout=WAIT_SECONDS + 10)
    platforms = [] if args.http_only else (settings.deployed_platforms or [])
    dispatcher = Dispatcher(client, settings, platforms, args.paused)
    server = make_server(args.host, args.port, http_front, threaded=True)
    signal.signal(
        signal.SIGTERM, lambda signum, frame: threading.Thread(target=server.shutdown).start()
    )
    if not args.http_only:
        dispatcher.start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        dispatcher.stop()


if __name__ == "__main__":
    main()
