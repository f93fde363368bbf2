"""A Cloud Tasks client for an emulator: the official client over an insecure gRPC channel.

Kept apart from `fanfuse.tools.devstack` so the Cloud Tasks queue adapter can use it without
importing the local-stack tooling. ClientOptions(api_endpoint=...) with anonymous credentials still
opens a TLS channel, which the emulator does not speak: the plain channel has to be handed in.
"""

from __future__ import annotations

import grpc
from google.cloud.tasks_v2 import CloudTasksClient
from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport


def tasks_client(host: str) -> CloudTasksClient:
    """Return a CloudTasksClient talking plain gRPC to `host` ("127.0.0.1:PORT")."""
    channel = grpc.insecure_channel(host)
    return CloudTasksClient(transport=CloudTasksGrpcTransport(channel=channel))
