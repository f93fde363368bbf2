"""Session fixtures: one local cloud stack per session, a clean slate per test (see cloud.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fanfuse.auth import keys
from fanfuse.runtimes import cloud as cloud_module
from fanfuse.tools.devstack.aws_stack import AwsStack, LambdaHost
from fanfuse.tools.devstack.functions_host import FunctionProcess
from fanfuse.tools.devstack.processes import free_port
from fanfuse.tools.devstack.stack import LocalStack
from fanfuse.tools.otlp import OtlpReceiver
from fanfuse.tools.stubs import StubSearxServer
from tests.support.e2e.aws import AwsCloud
from tests.support.e2e.cloud import (
    LEASE_SECONDS,
    PLATFORMS,
    SHORT_DEADLINE,
    WEB,
    Cloud,
    http_client,
    write_corpus,
)
from tests.support.option_scenarios import web_platforms


@pytest.fixture(scope="session")
def otlp() -> Iterator[OtlpReceiver]:
    """Where every handler process of the stacks exports its spans (OTLP/HTTP on 127.0.0.1):
    the stacks run traced, as a deployment with OTEL_* set does (test_e2e_tracing.py)."""
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="session")
def stub() -> Iterator[StubSearxServer]:
    """The web platforms' provider, shared by the stacks (each test resets it)."""
    server = StubSearxServer().start()
    try:
        yield server
    finally:
        server.stop()  # releases gated requests first, so no worker waits on them


def handler_env(tmp: Path, stub: StubSearxServer, otlp: OtlpReceiver) -> dict[str, str]:
    """What every handler process of a stack is given: the corpus, the web doubles, a log of
    the store's writes, and where to export its spans."""
    corpus = write_corpus(tmp / "physics.jsonl")
    return {
        **otlp.env(),
        "OTEL_SERVICE_NAME": "fanfuse-e2e",
        "FANFUSE_DOCS_CORPUS": str(corpus),
        "FANFUSE_VECTORS_CORPUS": str(corpus),
        "FANFUSE_CACHE_DIR": str(tmp / "cache"),
        "FANFUSE_EXTRA_PLATFORMS": json.dumps(web_platforms(stub, WEB)),
        "FANFUSE_STORE_WRITE_LOG": str(tmp / "store-writes.jsonl"),
        # Short, so a killed worker's run is taken over within seconds (test_e2e_faults.py);
        # its worker renews it every 1.5 s while it runs.
        "FANFUSE_LEASE_SECONDS": str(LEASE_SECONDS),
    }


@pytest.fixture(scope="session")
def cloud(
    tmp_path_factory: pytest.TempPathFactory, stub: StubSearxServer, otlp: OtlpReceiver
) -> Iterator[Cloud]:
    tmp = tmp_path_factory.mktemp("e2e")
    env = handler_env(tmp, stub, otlp)
    write_log = Path(env["FANFUSE_STORE_WRITE_LOG"])
    stack = LocalStack(PLATFORMS, extra_env=env, log_dir=tmp / "logs", tasks_max_retries=3)
    # Fails (never skips) when Java, gcloud's Firestore emulator or functions-framework is
    # missing: devstack checks the prerequisites and says what to install.
    try:
        addresses = stack.start()
        short = FunctionProcess(
            "start_search",
            env={**addresses.env(), **env, "FANFUSE_DEADLINE_SECONDS": str(SHORT_DEADLINE)},
            log_dir=tmp / "logs" / "short",
        ).start()
    except BaseException:
        stack.stop()
        raise
    try:
        assert addresses.api_key is not None
        headers = {keys.API_KEY_HEADER: addresses.api_key}  # every call is the `local` owner's
        with http_client(headers=headers) as http:
            yield Cloud(
                stack=stack,
                addresses=addresses,
                short_start=short,
                stub=stub,
                http=http,
                write_log=write_log,
                env=env,
            )
    finally:
        stub.reset()  # no worker waits on a gate while the stack stops
        short.stop()
        stack.stop()


@pytest.fixture(scope="session")
def aws_cloud(
    tmp_path_factory: pytest.TempPathFactory,
    stub: StubSearxServer,
    aws_env: None,
    otlp: OtlpReceiver,
) -> Iterator[AwsCloud]:
    """The AWS stack (moto, the Lambda handlers' local process) with the same platforms, and
    an HTTP-only handler process whose searches have SHORT_DEADLINE."""
    tmp = tmp_path_factory.mktemp("e2e-aws")
    env = handler_env(tmp, stub, otlp)
    stack = AwsStack(PLATFORMS, extra_env=env, log_dir=tmp / "logs", max_receives=3)
    try:
        addresses = stack.start()
        short_env = {**stack.env, "FANFUSE_DEADLINE_SECONDS": str(SHORT_DEADLINE)}
        short = LambdaHost(free_port(), short_env, log_dir=tmp / "logs", http_only=True)
        short.start()
    except BaseException:
        stack.stop()
        raise
    try:
        assert addresses.api_key is not None
        headers = {keys.API_KEY_HEADER: addresses.api_key}
        with http_client(headers=headers) as http:
            yield AwsCloud(
                stack=stack,
                addresses=addresses,
                short_start=short,
                stub=stub,
                http=http,
                write_log=Path(env["FANFUSE_STORE_WRITE_LOG"]),
                env=env,
            )
    finally:
        stub.reset()
        short.stop()
        stack.stop()
        cloud_module._settings = cloud_module._service = cloud_module._authenticator = None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.emulators)


@pytest.fixture
def e2e(e2e_gcp: Cloud) -> Cloud:
    """The GCP stack, clean (test_e2e_search.py runs its tests on both stacks instead)."""
    return e2e_gcp


@pytest.fixture
def e2e_aws(aws_cloud: AwsCloud) -> Iterator[AwsCloud]:
    """A clean slate on AWS: moto forgets everything and the table, the queues and the local
    key are made again; every queue runs; gates closed."""
    aws_cloud.reset()
    aws_cloud.stub.reset()
    yield aws_cloud
    aws_cloud.stub.reset()


@pytest.fixture
def e2e_gcp(cloud: Cloud) -> Iterator[Cloud]:
    """A clean slate: no documents (but the stack's key), every queue running, gates closed.

    Queues are resumed, not purged: the emulator's dispatcher thread for a queue dies when a
    task it is about to dispatch vanishes. Leftover tasks of earlier tests are harmless: their
    search is gone, so the functions acknowledge and drop them.
    """
    cloud.stack.reset_firestore()
    client = cloud.stack.tasks.client()
    for name in cloud.addresses.queues.values():
        client.resume_queue(name=cloud.stack.tasks.queue_path(name), timeout=5)
    cloud.stub.reset()
    yield cloud
    cloud.stub.reset()
