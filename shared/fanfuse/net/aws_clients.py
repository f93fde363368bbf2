"""boto3 clients built from Settings, each call bounded in time.

One place for the endpoint (moto's server in dev and tests), the region and the timeouts, so the
DynamoDB store and the SQS queue cannot drift apart. botocore's defaults (60 s read timeout, the
legacy retry mode) would let a stalled endpoint hold a start for minutes with nothing said.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fanfuse.settings import Settings

if TYPE_CHECKING:
    from botocore.config import Config
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_sqs import SQSClient

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 10.0
"""Per call, as the Firestore store's CALL_TIMEOUT_S: far above a healthy call (milliseconds),
a small part of the default deadline (120 s). SQS long polls wait up to 20 s on their own and
need a client made with `read_timeout` above that (see `sqs_client`)."""
MAX_ATTEMPTS = 3
"""botocore's standard retry mode: throttling and 5xx retried with backoff, 3 tries in all."""


def client_config(*, read_timeout: float = READ_TIMEOUT_S) -> Config:
    from botocore.config import Config

    return Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=read_timeout,
        retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"},
    )


def dynamodb_client(settings: Settings) -> DynamoDBClient:
    import boto3

    return boto3.client(
        "dynamodb",
        region_name=settings.aws_region,
        endpoint_url=settings.aws_endpoint_url,
        config=client_config(),
    )


def sqs_client(settings: Settings, *, read_timeout: float = READ_TIMEOUT_S) -> SQSClient:
    """`read_timeout`: above the longest WaitTimeSeconds of the receives made with it."""
    import boto3

    return boto3.client(
        "sqs",
        region_name=settings.aws_region,
        endpoint_url=settings.aws_endpoint_url,
        config=client_config(read_timeout=read_timeout),
    )
