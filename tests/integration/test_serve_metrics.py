"""`GET /metrics` and `GET /stats` of a real `fanfuse serve` (a child process on 127.0.0.1) over
stub SearXNG platforms: a known sequence of searches, then the counters, parsed by
prometheus-client's own parser, and the stats, checked against it and the final documents.

The sequence (one module-scoped server, so the counts are this sequence's alone):
1. "laser" on web_ok and web_bad (HTTP 500, one attempt): partial; web_ok asks its provider
   (a latency sample, a cache miss), web_bad fails with kind `error`;
2. "laser" on web_ok again: completed, answered wholly from the cache (a hit, no sample);
3. "plasma" on web_gate (held at the stub's gate), cancelled while it waits: cancelled.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fanfuse.auth import keys
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tools.devstack.serve_process import ServeProcess
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.models import utcnow
from tests.integration.test_serve import serve_env
from tests.support.option_scenarios import web_platforms

WEB = {"web_ok": "delay/0", "web_bad": "status/500", "web_gate": "gate/metrics"}
PRICE = 0.005
"""web_ok's price a request: charged once (search 1 asks; search 2 is a cache hit)."""
BAD = {"per_request_usd": 0.05}
"""web_bad's: never charged (a 500 is not billed)."""
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def stub() -> Iterator[StubSearxServer]:
    with StubSearxServer() as server:
        yield server


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, stub: StubSearxServer) -> dict[str, str]:
    env = serve_env(tmp_path_factory.mktemp("metrics"), stub)
    return {
        **env,
        "FANFUSE_EXTRA_PLATFORMS": json.dumps(web_platforms(stub, WEB)),
        "FANFUSE_PRICES": json.dumps({"web_ok": {"per_request_usd": PRICE}, "web_bad": BAD}),
    }


@pytest.fixture(scope="module")
def server(env: dict[str, str]) -> Iterator[ServeProcess]:
    with ServeProcess("--warm", "none", env=env) as process:
        yield process


@pytest.fixture(scope="module")
def http(server: ServeProcess) -> Iterator[httpx.Client]:
    headers = {keys.API_KEY_HEADER: server.api_key}
    with httpx.Client(base_url=server.url, timeout=30, headers=headers) as client:
        yield client


@pytest.fixture(scope="module")
def finals(http: httpx.Client, stub: StubSearxServer) -> list[dict[str, Any]]:
    """The sequence's three final documents."""
    first = http.post("/search", json={"query": "laser", "platform": ["web_ok", "web_bad"]})
    second = http.post("/search", json={"query": "laser", "platform": ["web_ok"]})
    started = http.post("/start_search", json={"query": "plasma", "platform": "web_gate"})
    assert started.status_code == 202, started.text
    try:
        cancelled = http.post(started.json()["cancel_url"])
    finally:
        stub.release("metrics")
    docs = [first.json(), second.json(), cancelled.json()]
    assert [d["status"] for d in docs] == ["partial", "completed", "cancelled"], docs
    runs = {(i, r["name"]): r for i, d in enumerate(docs) for r in d["platform_runs"]}
    assert runs[(0, "web_ok")]["cache"]["state"] == "miss"
    assert runs[(1, "web_ok")]["cache"]["state"] == "hit"
    assert runs[(0, "web_bad")]["failure"] == "error"
    return docs


def scrape(http: httpx.Client) -> Samples:
    answer = http.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=")
    samples: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_count_the_known_sequence(http: httpx.Client, finals: list[dict[str, Any]]) -> None:
    got = scrape(http)
    for status in ("partial", "completed", "cancelled"):
        assert value(got, "fanfuse_searches_total", status=status) == 1, status
    assert value(got, "fanfuse_searches_total", status="failed") == 0
    runs = "fanfuse_platform_runs_total"
    assert value(got, runs, platform="web_ok", outcome="succeeded") == 2
    assert value(got, runs, platform="web_bad", outcome="failed") == 1
    assert value(got, runs, platform="web_gate", outcome="cancelled") == 1
    assert sum(v for (n, _), v in got.items() if n == runs) == 4
    assert value(got, "fanfuse_platform_errors_total", platform="web_bad", kind="error") == 1
    assert sum(v for (n, _), v in got.items() if n == "fanfuse_platform_errors_total") == 1
    # one latency sample: the first web_ok run (the second came from the cache)
    sampled = finals[0]["platform_runs"]
    seconds = next(r for r in sampled if r["name"] == "web_ok")["timings"]["searching"]
    latency = "fanfuse_platform_latency_seconds"
    assert value(got, f"{latency}_count", platform="web_ok") == 1
    assert value(got, f"{latency}_sum", platform="web_ok") == pytest.approx(seconds)
    assert value(got, f"{latency}_count", platform="web_bad") == 0
    cache = "fanfuse_cache_queries_total"
    assert value(got, cache, platform="web_ok", result="hit") == 1
    assert value(got, cache, platform="web_ok", result="miss") == 1
    spent = sum(v for (n, _), v in got.items() if n == "fanfuse_cost_usd_total")
    assert spent == pytest.approx(sum(d["cost"]["total_usd"] for d in finals))
    assert value(got, "fanfuse_cost_usd_total", platform="web_ok") == pytest.approx(PRICE)
    assert value(got, "fanfuse_cost_usd_total", platform="web_bad") == 0
    # one failure does not open a breaker: web_bad is closed, and says so
    assert value(got, "fanfuse_breaker_state", platform="web_bad", state="closed") == 1
    assert value(got, "fanfuse_breaker_state", platform="web_bad", state="open") == 0


def test_stats_agree_with_the_final_documents(
    http: httpx.Client, finals: list[dict[str, Any]]
) -> None:
    answer = http.get("/stats", params={"window": "1h"})
    assert answer.status_code == 200, answer.text
    figures = answer.json()
    assert figures["scope"] == "all" and figures["searches"] == 3 and figures["finished"] == 3
    rows = {p["name"]: p for p in figures["platforms"]}
    ok = rows["web_ok"]
    assert ok["runs"] == 2 and ok["outcomes"]["succeeded"] == 2 and ok["latency_samples"] == 1
    assert ok["cache_hits"] == 1 and ok["cache_misses"] == 1 and ok["cache_hit_rate"] == 0.5
    assert ok["spend_usd"] == pytest.approx(PRICE) == figures["spend_usd"]
    results = [r for d in finals for r in d["results"]]
    assert ok["results"] == sum("web_ok" in r["platforms"] for r in results) > 0
    assert ok["unique_results"] == sum(r["platforms"] == ["web_ok"] for r in results)
    assert rows["web_bad"]["errors"] == {"error": 1} and rows["web_bad"]["breaker"] == "closed"
    assert rows["web_gate"]["outcomes"]["cancelled"] == 1
    assert http.get("/search_status/stats", params={"window": "1h"}).json()["searches"] == 3


def test_who_reads_the_stats_and_the_metrics(
    server: ServeProcess, env: dict[str, str], finals: list[dict[str, Any]]
) -> None:
    store = SqliteStore(Path(env["FANFUSE_DB_PATH"]))
    try:
        plaintext, record = keys.new_key("team", "a tenant", None, None, utcnow())
        store.put_key(record)
    finally:
        store.close()
    tenant = {keys.API_KEY_HEADER: plaintext}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        own = client.get("/stats", headers=tenant)
        assert own.status_code == 200 and own.json()["scope"] == "owner"
        assert own.json()["searches"] == 0  # the operator's searches are not the tenant's
        other = client.get("/stats", params={"owner": "key:local"}, headers=tenant)
        assert other.status_code == 403 and other.json()["error"] == "forbidden"
        assert client.get("/metrics", headers=tenant).status_code == 403
        assert client.get("/stats").status_code == 401
        assert client.get("/metrics").status_code == 401
        bad = client.get("/stats", params={"window": "soon", "query": "x"}, headers=tenant)
        assert bad.status_code == 400
        assert {p["field"] for p in bad.json()["problems"]} == {"query"}
        for spelling in ("0", "1.5h", "soon"):
            window = client.get("/stats", params={"window": spelling}, headers=tenant)
            assert window.status_code == 400 and window.json()["problems"][0]["field"] == "window"
        longest = client.get("/stats", params={"window": "99d"}, headers=tenant)  # reads 30 days
        assert longest.status_code == 200 and longest.json()["window_s"] == 30 * 86400


def test_a_key_made_for_owner_local_is_no_operator(
    server: ServeProcess, env: dict[str, str], http: httpx.Client
) -> None:
    """Issue 29, item 4: `fanfuse keys create --owner local` made a key whose subject is the
    printed key's (`key:local`), and the operators were named by subject: that key read
    `/metrics` and every tenant's `/stats`. The operator is now the printed key itself, by its
    id; any other key of owner `local` is a tenant like any other (and, being of the same
    owner, sees that owner's figures: the owner's, not the deployment's)."""
    store = SqliteStore(Path(env["FANFUSE_DB_PATH"]))
    try:
        plaintext, record = keys.new_key(keys.LOCAL_OWNER, "made later", None, None, utcnow())
        store.put_key(record)
    finally:
        store.close()
    impostor = {keys.API_KEY_HEADER: plaintext}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.get("/metrics", headers=impostor).status_code == 403
        other = client.get("/stats", params={"owner": "key:team"}, headers=impostor)
        assert other.status_code == 403 and other.json()["error"] == "forbidden"
        assert client.get("/stats", headers=impostor).json()["scope"] == "owner"
    assert http.get("/metrics").status_code == 200  # the printed key: the operator
    everyone = http.get("/stats", params={"owner": "key:team"})
    assert everyone.status_code == 200 and everyone.json()["scope"] == "owner"
    assert http.get("/stats").json()["scope"] == "all"
