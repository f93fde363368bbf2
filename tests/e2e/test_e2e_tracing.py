"""One trace per search across the cloud hops, on both stacks, exported by the real OTLP/HTTP
exporter of every handler process to a receiver in this process (conftest.py's `otlp`).

The caller's `traceparent` is continued by start_search; the queues carry the trace to each
run_platform and to the aggregate task (Cloud Tasks headers; SQS message attributes); every
span names the search; a duplicate delivery is a second run_platform span that calls no
provider (it has no task carrier: it continues the trace its task document keeps).
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from fanfuse.queue.port import PlatformMessage
from fanfuse.queue.sqs import SqsQueue
from fanfuse.tools.otlp import (
    OtlpReceiver,
    ReceivedSpan,
    critical_path,
    descendants,
    roots,
    tree,
)
from tests.support.e2e.aws import AwsCloud
from tests.support.e2e.cloud import Runtime

PLATFORMS = ("docs", "vectors", "web_ok")


@pytest.fixture(params=["gcp", "aws"])
def e2e(request: pytest.FixtureRequest) -> Runtime:
    runtime: Runtime = request.getfixturevalue(f"e2e_{request.param}")
    return runtime


def runs_of(spans: list[ReceivedSpan], platform: str) -> list[ReceivedSpan]:
    return [
        s
        for s in spans
        if s.name == "run_platform" and s.attributes.get("fanfuse.platform") == platform
    ]


def complete(spans: list[ReceivedSpan], trace_id: str, runs: int = 1) -> bool:
    """Every hop of the search exported: the start's request span, each platform's run (`runs`
    of web_ok's), each with its fan-in (the last one finalizes: rules/fan_in.py)."""
    mine = [s for s in spans if s.trace_id == trace_id]
    names = [s.name for s in mine]
    return (
        "POST start_search" in names
        and all(runs_of(mine, p) for p in PLATFORMS)
        and len(runs_of(mine, "web_ok")) >= runs
        and names.count("transact fan_in") >= len(PLATFORMS)
    )


def test_a_search_is_one_trace_across_the_queue_hops(
    e2e: Runtime, otlp: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    trace_id, caller_span = secrets.token_hex(16), secrets.token_hex(8)
    headers = {"traceparent": f"00-{trace_id}-{caller_span}-01"}
    accepted = e2e.start({"query": "electrons", "platform": ",".join(PLATFORMS)}, headers=headers)
    task_id = accepted["task_id"]
    view = e2e.wait(accepted)
    assert view["status"] == "completed"
    assert view["trace"].split("-")[1] == trace_id  # the task document keeps the trace

    spans = [s for s in otlp.wait_for(lambda s: complete(s, trace_id)) if s.trace_id == trace_id]
    assert complete(spans, trace_id), tree(spans)
    # one root: the start's request, under the caller's span (not ours, so not exported)
    (root,) = roots(spans)
    assert root.name == "POST start_search" and root.kind == "server"
    assert root.parent_id == caller_span
    # every span names the search (the client spans of the store and the queue too)
    assert {s.name for s in spans if s.attributes.get("fanfuse.task_id") != task_id} == set()
    # a run per platform, under its queue's enqueue span, and one HTTP client span per
    # provider call (web_ok's; docs and vectors are local)
    for platform in PLATFORMS:
        (run,) = runs_of(spans, platform)
        assert run.kind == "consumer" and run.attributes["fanfuse.outcome"] == "succeeded"
        enqueue = next(s for s in spans if s.span_id == run.parent_id)
        assert enqueue.name == "enqueue run_platform" and enqueue.kind == "producer"
        assert enqueue.attributes["fanfuse.platform"] == platform
        assert any(s.name == "queued run_platform" for s in spans if s.parent_id == enqueue.span_id)
        calls = [s for s in descendants(spans, run) if s.kind == "client" and s.name == "GET"]
        if platform == "web_ok":
            (call,) = calls
            assert call.attributes["http.response.status_code"] == 200
            assert call.attributes["fanfuse.attempts"] == 1
            assert call.attributes["url.full"].startswith("http://127.0.0.1:")
        else:
            assert calls == []
        assert critical_path(spans, run), "the store's round trips are spans too"
    assert view["timeline"]["finalized_by"] == "fan_in"  # no aggregate hop
    assert not [s for s in spans if s.name in ("aggregate", "transact finalize")]

    # A duplicate delivery of web_ok, with no carrier: a second run in the same trace, skipped,
    # with no provider call under it.
    searched = e2e.stub.requests["delay/0"]
    redeliver(e2e, task_id, "web_ok")
    spans = [
        s for s in otlp.wait_for(lambda s: complete(s, trace_id, runs=2)) if s.trace_id == trace_id
    ]
    first, second = sorted(runs_of(spans, "web_ok"), key=lambda s: s.start_ns)
    assert first.attributes["fanfuse.outcome"] == "succeeded"
    assert second.attributes["fanfuse.outcome"] == "skipped"
    assert [s for s in descendants(spans, second) if s.name == "GET"] == []
    assert e2e.stub.requests["delay/0"] == searched
    assert len(roots(spans)) == 1  # still one tree

    with capsys.disabled():  # the span tree, for whoever runs this with -s
        print(f"\n{type(e2e).__name__}: one 3-platform search\n{tree(spans)}")


def redeliver(e2e: Runtime, task_id: str, platform: str) -> None:
    """The platform's task delivered again as its queue would, with no trace carrier."""
    message: dict[str, Any] = {"task_id": task_id, "platform": platform}
    if isinstance(e2e, AwsCloud):  # a message on its queue, which the Lambda host receives
        SqsQueue(e2e.settings).enqueue_platform(PlatformMessage(**message))
        return
    answer = e2e.deliver("run_platform", message)
    assert answer.status_code == 200 and answer.json()["outcome"] == "skipped"
