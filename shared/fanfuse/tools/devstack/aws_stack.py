"""The local AWS stack: moto's server (DynamoDB, SQS) and the Lambda handlers, on 127.0.0.1.

What `fanfuse dev --cloud aws` and the AWS end-to-end tests run. moto cannot run Lambda code
without Docker, so the handlers run in one local process instead
(`fanfuse.fronts.aws_lambda.local`): an HTTP front that turns requests into function-URL events for
`aws_lambda.http`, and a dispatcher that long-polls the queues and invokes the worker and aggregator
handlers, as event source mappings would. Everything else is as deployed: the table, the queues with
their dead-letter queues and redrive, the signed messages (a random FANFUSE_TASKS_HMAC_SECRET per
stack, never printed), and an API key for owner `local` put in the table once it exists.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import secrets
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fanfuse.auth import keys
from fanfuse.http.routes import PUBLIC_TARGETS
from fanfuse.settings import Settings
from fanfuse.tools.devstack.lifetime import StackLifetime
from fanfuse.tools.devstack.processes import (
    LOOPBACK,
    STARTUP_S,
    Component,
    ManagedProcess,
    default_log_dir,
    free_port,
    http_request,
    wait_until,
)
from fanfuse.wire.models import ApiKey, utcnow

AWS_DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
}
"""What every process of the AWS stack gets: credentials moto accepts, and no instance metadata
lookup (botocore would otherwise try an address off this machine for credentials)."""


class MotoProcess(Component):
    """moto's server with DynamoDB's atomicity (`devstack.moto_app`) in a child process of its
    own, as a stack component: stopped with its process group and guarded by the stack's
    watchdog like the emulators."""

    def __init__(
        self,
        port: int | None = None,
        *,
        log_dir: Path | None = None,
        startup_timeout: float = STARTUP_S,
    ) -> None:
        self.port = port or free_port()
        self.startup_timeout = startup_timeout
        self.startup_seconds: float | None = None
        argv = [sys.executable, "-m", "fanfuse.tools.devstack.moto_app", "--port", str(self.port)]
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


VISIBILITY_MARGIN = 30
"""Seconds a received message stays hidden beyond the search deadline (a platform run's
longest), as the Lambda timeout in infra/aws does."""


@dataclass(frozen=True)
class AwsAddresses:
    """Where the running AWS stack lives; `env()` is what the handlers' process is given."""

    endpoint: str
    region: str
    table: str
    queue_prefix: str
    functions: dict[str, str]
    queues: dict[str, str] = field(default_factory=dict)
    deployed: tuple[str, ...] = ()
    log_dir: Path | None = None
    tasks_secret: str | None = field(default=None, repr=False)
    api_key: str | None = field(default=None, repr=False)

    def env(self) -> dict[str, str]:
        secret = {"FANFUSE_TASKS_HMAC_SECRET": self.tasks_secret} if self.tasks_secret else {}
        return {
            **AWS_DUMMY_ENV,
            "AWS_DEFAULT_REGION": self.region,
            "FANFUSE_CLOUD": "aws",
            "FANFUSE_AWS_ENDPOINT_URL": self.endpoint,
            "FANFUSE_AWS_REGION": self.region,
            "FANFUSE_DYNAMODB_TABLE": self.table,
            "FANFUSE_QUEUE_PREFIX": self.queue_prefix,
            "FANFUSE_FUNCTION_URLS": json.dumps(self.functions, sort_keys=True),
            "FANFUSE_DEPLOYED_PLATFORMS": json.dumps(self.deployed),
            **secret,
        }

    def describe(self) -> list[tuple[str, str]]:
        lines = [("moto", self.endpoint), ("dynamodb", self.table)]
        lines += [(f"sqs:{name}", url) for name, url in self.queues.items()]
        lines += [(target, self.functions[target]) for target in self.functions]
        if self.log_dir is not None:
            lines.append(("logs", str(self.log_dir)))
        if self.api_key is not None:
            lines.append(("api_key", self.api_key))
        return lines


class LambdaHost(Component):
    """`python -m fanfuse.fronts.aws_lambda.local --port N`: the HTTP front and the queue
    dispatcher."""

    def __init__(
        self,
        port: int,
        env: Mapping[str, str],
        *,
        log_dir: Path | None = None,
        paused: Path | None = None,
        http_only: bool = False,
        startup_timeout: float = STARTUP_S,
    ) -> None:
        self.port = port
        self.startup_timeout = startup_timeout
        self.startup_seconds: float | None = None
        argv = [
            sys.executable,
            "-m",
            "fanfuse.fronts.aws_lambda.local",
            "--host",
            LOOPBACK,
            "--port",
            str(port),
        ]
        argv += ["--paused", str(paused)] if paused is not None else []
        argv += ["--http-only"] if http_only else []
        name = "lambda-http" if http_only else "lambda"
        log_path = (log_dir or default_log_dir()) / f"{name}.log"
        self.env = dict(env)
        self.process = ManagedProcess(name, argv, log_path=log_path)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def _ready(self) -> bool:
        # Any HTTP answer means the handlers imported and the dispatcher started before it.
        return http_request("GET", self.url + "/robots.txt", timeout=1.0)[0] > 0

    def launch(self) -> None:
        self.process.env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self._started_at = time.monotonic()
        self.process.start()

    def wait_ready(self) -> None:
        wait_until(self._ready, self.startup_timeout, "Lambda handlers", process=self.process)
        self.startup_seconds = time.monotonic() - self._started_at


class AwsStack(StackLifetime[AwsAddresses]):
    """moto + the table + the queues (one per platform, plus aggregate) + the handlers' process.

    `with AwsStack(["docs"]) as addresses:` starts everything and stops it on exit, on signals
    and at interpreter exit; a watchdog stops the children if this process is killed
    (`lifetime.StackLifetime`, as for the GCP stack).
    """

    def __init__(
        self,
        platforms: Iterable[str],
        *,
        moto_port: int | None = None,
        http_port: int | None = None,
        queue_prefix: str | None = None,
        table: str | None = None,
        extra_env: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        max_receives: int = 5,
        handle_signals: bool = True,
    ) -> None:
        self.log_dir = log_dir or default_log_dir()
        super().__init__(self.log_dir, handle_signals)
        self.platforms = list(dict.fromkeys(platforms))
        self.extra_env = dict(extra_env or {})
        defaults = Settings()
        self.max_receives = max_receives
        self.moto = MotoProcess(moto_port, log_dir=self.log_dir)
        port = http_port or free_port()
        base = f"http://{LOOPBACK}:{port}"
        self.addresses = AwsAddresses(
            endpoint=self.moto.url,
            region=defaults.aws_region,
            table=table or defaults.dynamodb_table,
            queue_prefix=defaults.queue_prefix if queue_prefix is None else queue_prefix,
            functions={target: f"{base}/{target}" for target in PUBLIC_TARGETS},
            deployed=tuple(self.platforms),
            log_dir=self.log_dir,
            tasks_secret=secrets.token_urlsafe(32),
        )
        self.env = {**self.addresses.env(), **self.extra_env}
        deadline = self.extra_env.get("FANFUSE_DEADLINE_SECONDS")
        self.settings = Settings(
            cloud="aws",
            aws_endpoint_url=self.addresses.endpoint,
            aws_region=self.addresses.region,
            dynamodb_table=self.addresses.table,
            queue_prefix=self.addresses.queue_prefix,
            deadline_seconds=float(deadline) if deadline else defaults.deadline_seconds,
        )
        self.paused = self.log_dir / "paused"
        self.paused.mkdir(parents=True, exist_ok=True)
        self.handlers = LambdaHost(port, self.env, log_dir=self.log_dir, paused=self.paused)
        self.local_key: ApiKey | None = None

    def components(self) -> list[Component]:
        return [self.moto, self.handlers]

    def describe(self) -> list[tuple[str, str]]:
        """One (component, address) pair per line of `fanfuse dev --cloud aws`'s banner."""
        return self.addresses.describe()

    def boot(self) -> AwsAddresses:
        self.launch(self.moto)
        self.moto.wait_ready()
        self.provision()
        self.launch(self.handlers)
        self.handlers.wait_ready()
        return self.addresses

    def provision(self) -> None:
        """The table, the queues and the local key (made once per stack), as Terraform and
        `fanfuse keys` would."""
        from fanfuse.net.aws_clients import dynamodb_client, sqs_client
        from fanfuse.queue.sqs import ensure_queues
        from fanfuse.store.dynamodb import DynamoStore
        from fanfuse.store.dynamodb_codec import ensure_table

        # This process's clients, too, must never look for credentials off this machine.
        os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
        for name, value in AWS_DUMMY_ENV.items():
            os.environ.setdefault(name, value)
        dynamodb = dynamodb_client(self.settings)
        ensure_table(dynamodb, self.settings.dynamodb_table)
        queues = ensure_queues(
            sqs_client(self.settings),
            self.settings.queue_prefix,
            self.platforms,
            visibility_timeout=int(self.settings.deadline_seconds) + VISIBILITY_MARGIN,
            max_receives=self.max_receives,
        )
        plaintext = None
        if self.local_key is None:
            plaintext, self.local_key = keys.new_key(
                keys.LOCAL_OWNER, "fanfuse dev", None, None, utcnow()
            )
        DynamoStore(dynamodb, self.settings.dynamodb_table).put_key(self.local_key)
        api_key = plaintext or self.addresses.api_key
        self.addresses = dataclasses.replace(self.addresses, queues=queues, api_key=api_key)

    def pause(self, name: str) -> None:
        """Hold the queue of platform `name`: the dispatcher leaves its messages there."""
        (self.paused / name).touch()

    def resume_all(self) -> None:
        for held in self.paused.iterdir():
            held.unlink()

    def reset(self) -> None:
        """A clean slate for a test: every queue resumed, moto forgets everything, then the
        table, the queues and the local key are made again."""
        self.resume_all()
        self.moto.reset()
        self.provision()
