"""moto's server on 127.0.0.1 for the session (fanfuse.devstack.moto), every backend reset and the
table made again before each test; botocore gets dummy credentials and never looks for others."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fanfuse.aws_clients import dynamodb_client
from fanfuse.devstack.moto import MotoServer
from fanfuse.settings import Settings
from fanfuse.store.dynamodb_codec import ensure_table

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
def moto_server() -> Iterator[MotoServer]:
    with pytest.MonkeyPatch.context() as env:
        for name, value in AWS_ENV.items():
            env.setenv(name, value)
        server = MotoServer().start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def aws_settings(moto_server: MotoServer) -> Iterator[Settings]:
    """Settings aimed at moto, on a clean slate with the table made."""
    moto_server.reset()
    settings = Settings(aws_endpoint_url=moto_server.endpoint, dynamodb_table="fanfuse-test")
    client = dynamodb_client(settings)
    ensure_table(client, settings.dynamodb_table)
    client.close()
    yield settings
