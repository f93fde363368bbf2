"""moto's server in this process on 127.0.0.1 (a free port), and boto3 clients aimed at it only.

Every client gets `endpoint_url` and dummy credentials explicitly, and the environment says the
same (AWS_EC2_METADATA_DISABLED too), so botocore never looks anywhere for credentials or a
region: the tests stay on loopback (docs/security.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

REGION = "us-east-1"
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
}


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    os.environ.update(AWS_ENV)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def client(service: str, endpoint: str) -> Any:
    return boto3.client(
        service,  # type: ignore[call-overload]
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
    )
