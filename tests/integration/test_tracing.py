"""Tracing in one process: the embedded runtime (in this process) and `fanfuse serve` (a child
process), each exporting with the real OTLP/HTTP exporter to a receiver on 127.0.0.1.

A search is one trace: one root, no orphan, a run_platform span per platform (under the
in-process queue's enqueue span) and an HTTP client span per provider call, every span naming
the search; serve continues the caller's `traceparent`; a duplicate delivery is a second
run_platform span that calls no provider. With no OTEL_* variable, nothing is traced.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fanfuse.auth import keys
from fanfuse.queue.port import PlatformMessage
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.tools.devstack.serve_process import ServeProcess
from fanfuse.tools.otlp import OtlpReceiver, ReceivedSpan, descendants, roots, tree
from fanfuse.tools.stubs import StubSearxServer, stub_platforms
from fanfuse.tracing import delivery, setup, spans

DELAYS = (0.0, 0.05, 0.1)


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as found:
        yield found


@pytest.fixture
def stub() -> Iterator[StubSearxServer]:
    with StubSearxServer() as server:
        yield server


@pytest.fixture
def traced(receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    """Tracing on in this process, exporting to `receiver` (the exporter reads the process's
    variables, as in a deployment); off again afterwards."""
    for name, value in receiver.env().items():
        monkeypatch.setenv(name, value)
    assert setup.configure()
    try:
        yield receiver
    finally:
        setup.shutdown()


def runs(found: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [s for s in found if s.name == "run_platform"]


def check_one_trace(found: list[ReceivedSpan], task_id: str, platforms: list[str]) -> None:
    """One root, no orphan, the search named on every span, a run per platform, one HTTP client
    span per provider call under it."""
    assert len(roots(found)) == 1, tree(found)
    assert len({s.trace_id for s in found}) == 1
    assert [s.name for s in found if s.attributes.get(spans.TASK_ID) != task_id] == []
    assert sorted(r.attributes[spans.PLATFORM] for r in runs(found)) == sorted(platforms)
    for run in runs(found):
        calls = [s for s in descendants(found, run) if s.kind == "client" and s.name == "GET"]
        assert len(calls) == 1, tree(found)
        assert calls[0].attributes["http.response.status_code"] == 200
        assert calls[0].attributes["fanfuse.call"] == run.attributes[spans.PLATFORM]
        parent = next(s for s in found if s.span_id == run.parent_id)
        assert parent.name == "enqueue run_platform" and parent.kind == "producer"


async def test_an_embedded_search_is_one_trace_and_a_duplicate_delivery_calls_no_provider(
    traced: OtlpReceiver, stub: StubSearxServer, tmp_path: Path
) -> None:
    platforms = stub_platforms(stub, DELAYS)
    names = sorted(platforms)
    settings = Settings(db_path=tmp_path / "t.db", extra_platforms=platforms)
    async with EmbeddedRuntime(settings) as runtime:
        view = await runtime.search("lasers", platform=names, cache="bypass")
        assert view.status.value == "completed" and view.trace is not None
        trace_id = view.trace.split("-")[1]
        # the same platform delivered again, with no carrier: the task document's trace
        with delivery.inbound(None, "run_platform"):
            message = PlatformMessage(task_id=view.task_id, platform=names[0])
            assert await runtime.service.run_platform(message) == "skipped"
    setup.flush()

    def done(found: list[ReceivedSpan]) -> bool:
        mine = [s for s in found if s.trace_id == trace_id]
        return len(runs(mine)) == 4 and any(s.name == "aggregate" for s in mine)

    found = [s for s in traced.wait_for(done) if s.trace_id == trace_id]
    (root,) = roots(found)
    assert root.name == "start" and root.parent_id is None
    duplicate = next(r for r in runs(found) if r.attributes["fanfuse.outcome"] == "skipped")
    assert [s for s in descendants(found, duplicate) if s.name == "GET"] == []
    check_one_trace(
        [s for s in found if s not in [duplicate, *descendants(found, duplicate)]],
        view.task_id,
        names,
    )


async def test_with_no_otel_variable_nothing_is_traced(
    stub: StubSearxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    platforms = stub_platforms(stub, DELAYS[:1])
    settings = Settings(db_path=tmp_path / "t.db", extra_platforms=platforms)
    async with EmbeddedRuntime(settings) as runtime:
        assert not spans.enabled()
        view = await runtime.search("lasers", platform=list(platforms), cache="bypass")
    assert view.status.value == "completed" and view.trace is None
    assert view.timeline.finalized is not None  # the timeline needs no tracing


def test_serve_continues_the_callers_trace(
    receiver: OtlpReceiver, stub: StubSearxServer, tmp_path: Path
) -> None:
    platforms = stub_platforms(stub, DELAYS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FANFUSE_", "OTEL_"))}
    env.update(
        {
            **receiver.env(),
            "OTEL_SERVICE_NAME": "fanfuse-serve",
            "FANFUSE_DB_PATH": str(tmp_path / "serve.db"),
            "FANFUSE_CACHE_DIR": str(tmp_path / "cache"),
            "FANFUSE_EXTRA_PLATFORMS": json.dumps(
                {n: p.model_dump() for n, p in platforms.items()}
            ),
        }
    )
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    with ServeProcess("--warm", "none", env=env, log_dir=tmp_path) as server:
        headers = {keys.API_KEY_HEADER: server.api_key, "traceparent": f"00-{trace_id}-{caller}-01"}
        payload = {"query": "lasers", "platform": sorted(platforms), "cache": "bypass"}
        answer = httpx.post(f"{server.url}/search", json=payload, headers=headers, timeout=60)
        assert answer.status_code == 200 and answer.json()["status"] == "completed"
        task_id = answer.json()["task_id"]

        def done(found: list[ReceivedSpan]) -> bool:
            mine = [s for s in found if s.trace_id == trace_id]
            names = {s.name for s in mine}
            return len(runs(mine)) == 3 and "aggregate" in names and "POST search" in names

        found = [s for s in receiver.wait_for(done) if s.trace_id == trace_id]
    (root,) = roots(found)
    assert root.name == "POST search" and root.kind == "server" and root.parent_id == caller
    assert root.service == "fanfuse-serve"
    check_one_trace(found, task_id, sorted(platforms))
