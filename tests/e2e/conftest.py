"""Session fixtures: one local cloud stack per session, a clean slate per test (see cloud.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fanfuse.auth import keys
from fanfuse.devstack import FunctionProcess, LocalStack
from fanfuse.testing import StubSearxServer
from tests.e2e.cloud import LEASE_SECONDS, PLATFORMS, SHORT_DEADLINE, WEB, Cloud, write_corpus
from tests.option_scenarios import web_platforms


@pytest.fixture(scope="session")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    tmp = tmp_path_factory.mktemp("e2e")
    corpus = write_corpus(tmp / "physics.jsonl")
    write_log = tmp / "firestore-writes.jsonl"
    stub = StubSearxServer().start()
    extra = web_platforms(stub, WEB)
    env = {
        "FANFUSE_DOCS_CORPUS": str(corpus),
        "FANFUSE_VECTORS_CORPUS": str(corpus),
        "FANFUSE_CACHE_DIR": str(tmp / "cache"),
        "FANFUSE_EXTRA_PLATFORMS": json.dumps(extra),
        "FANFUSE_FIRESTORE_WRITE_LOG": str(write_log),
        # Short, so a killed worker's run is taken over within seconds (test_e2e_faults.py);
        # its worker renews it every 1.5 s while it runs.
        "FANFUSE_LEASE_SECONDS": str(LEASE_SECONDS),
    }
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
        stub.stop()
        stack.stop()
        raise
    try:
        assert addresses.api_key is not None
        headers = {keys.API_KEY_HEADER: addresses.api_key}  # every call is the `local` owner's
        with httpx.Client(timeout=60, headers=headers) as http:
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
        stub.stop()  # releases gated requests first, so no worker waits on them
        short.stop()
        stack.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.emulators)


@pytest.fixture
def e2e(cloud: Cloud) -> Iterator[Cloud]:
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
