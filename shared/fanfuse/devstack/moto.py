"""moto's server (`python -m moto.server`) on 127.0.0.1: DynamoDB and SQS for the AWS stack.

One process serves every AWS service moto emulates, by the request's signature; it keeps
everything in memory, so a stop is a clean slate. moto ships with the `dev` extra (and
`fanfuse[aws]` users install `moto[server]` to run `fanfuse dev --cloud aws`): a missing one
fails with what to install, never a skip.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

from fanfuse.devstack.processes import (
    LOOPBACK,
    Component,
    ManagedProcess,
    default_log_dir,
    free_port,
    http_request,
    wait_until,
)

AWS_DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
}
"""What every process of the AWS stack gets: credentials moto accepts, and no instance metadata
lookup (botocore would otherwise try an address off this machine for credentials)."""


class MotoServer(Component):
    """`python -m moto.server -H 127.0.0.1 -p PORT`, its output in `moto.log`."""

    def __init__(
        self,
        port: int | None = None,
        *,
        log_dir: Path | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        self.port = port or free_port()
        self.startup_timeout = startup_timeout
        self.startup_seconds: float | None = None
        argv = [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(self.port)]
        log_path = (log_dir or default_log_dir()) / "moto.log"
        self.process = ManagedProcess("moto", argv, log_path=log_path)

    @property
    def url(self) -> str:
        """What FANFUSE_AWS_ENDPOINT_URL (and any boto3 client's endpoint_url) is set to."""
        return f"http://{LOOPBACK}:{self.port}"

    def _ready(self) -> bool:
        return http_request("GET", self.url + "/moto-api/", timeout=1.0)[0] == 200

    def launch(self) -> None:
        if importlib.util.find_spec("moto") is None:
            raise RuntimeError("moto not installed: pip install 'moto[server,dynamodb,sqs]'")
        self._started_at = time.monotonic()
        self.process.start()

    def wait_ready(self) -> None:
        wait_until(self._ready, self.startup_timeout, "moto server", process=self.process)
        self.startup_seconds = time.monotonic() - self._started_at

    def reset(self) -> None:
        """Forget every resource (tables, queues): moto's own reset endpoint."""
        status, body = http_request("POST", self.url + "/moto-api/reset")
        if status != 200:
            raise RuntimeError(f"moto reset failed: {status} {body[:300]!r}")
