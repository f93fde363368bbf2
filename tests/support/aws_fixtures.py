"""The AWS fixtures (tests/conftest.py imports them for every test directory): moto's server on
127.0.0.1 for the session (fanfuse.tools.devstack.moto_app), every backend reset and the table made
again before each test that asks for `aws_settings`; botocore gets dummy credentials and never
looks for others. `dynamo_store`: the store on it, for tests run on every store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fanfuse.net.aws_clients import dynamodb_client
from fanfuse.settings import Settings
from fanfuse.store.dynamodb import DynamoStore
from fanfuse.store.dynamodb_codec import ensure_table
from fanfuse.store.write_log import WriteLog
from fanfuse.tools.devstack.moto_app import ThreadedMoto

AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
}


@pytest.fixture(scope="session")
def aws_env() -> Iterator[None]:
    """Dummy credentials and a region for every boto3 client of the session, and no instance
    metadata lookup (botocore would otherwise try an address off this machine)."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in AWS_ENV.items():
            env.setenv(name, value)
        yield


@pytest.fixture(scope="session")
def moto_server(aws_env: None) -> Iterator[ThreadedMoto]:
    server = ThreadedMoto().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def aws_settings(moto_server: ThreadedMoto) -> Iterator[Settings]:
    """Settings aimed at moto, on a clean slate with the table made."""
    moto_server.reset()
    settings = Settings(aws_endpoint_url=moto_server.endpoint, dynamodb_table="fanfuse-test")
    client = dynamodb_client(settings)
    ensure_table(client, settings.dynamodb_table)
    client.close()
    yield settings


def open_dynamo(settings: Settings, write_log: WriteLog | None = None) -> DynamoStore:
    return DynamoStore(dynamodb_client(settings), settings.dynamodb_table, write_log=write_log)
