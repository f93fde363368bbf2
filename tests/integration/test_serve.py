"""`fanfuse serve` over real sockets: a `fanfuse serve --port 0` child process on 127.0.0.1.

One server for the module (its start-up is most of the cost), on a tiny `docs` corpus and stub
SearXNG platforms (`fanfuse.tools.stubs.StubSearxServer`): `web_ok` answers at once, `web_slow`
after 0.3 s, `web_gate` only once the test releases its gate. The functions' contract
(tests/e2e/test_e2e_http.py) is asserted here again against `serve`: same codes, same bodies,
the same verified callers (the key `serve` prints, sent by `http` by default).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sqlite3
import statistics
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from typer.testing import CliRunner

from fanfuse.auth import keys
from fanfuse.cli.main import app
from fanfuse.http.deployment import Deployment
from fanfuse.http.openapi import render
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tools.bench.streams import cpu_seconds
from fanfuse.tools.devstack.serve_process import ServeProcess
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.models import ApiKey, utcnow
from tests.support.option_scenarios import web_platforms

DOCS = {
    "D1": "Microwave radiation fed through a rectangular waveguide.",
    "D2": "The dielectric constant of liquids measured at microwave frequencies.",
    "D3": "A laser produces coherent light by stimulated emission.",
    "D4": "Plasma waves propagate in the ionosphere.",
}
WEB = {
    "web_ok": "delay/0",
    "web_slow": "delay/0.3",
    "web_gate": "gate/serve",
    "web_first": "gate/first",
}
CHECKED_IN = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"

JSON = {"Content-Type": "application/json"}


def serve_env(tmp: Path, stub: StubSearxServer) -> dict[str, str]:
    """Only the variables set here: no provider keys or platforms of the machine leak in."""
    corpus = tmp / "lab.trec"
    corpus.write_text(
        "".join(f"<DOC>\n<DOCNO>{k}</DOCNO>\n<TEXT>{v}</TEXT>\n</DOC>\n" for k, v in DOCS.items()),
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
    return {
        **env,
        "FANFUSE_CACHE_DIR": str(tmp / "cache"),
        "FANFUSE_DB_PATH": str(tmp / "serve.db"),
        "FANFUSE_DOCS_CORPUS": str(corpus),
        "FANFUSE_VECTORS_CORPUS": str(corpus),
        "FANFUSE_PROGRESS_INTERVAL": "0",
        "FANFUSE_DEADLINE_SECONDS": "20",
        "FANFUSE_EXTRA_PLATFORMS": json.dumps(web_platforms(stub, WEB)),
    }


@pytest.fixture(scope="module")
def stub() -> Iterator[StubSearxServer]:
    with StubSearxServer() as server:
        yield server


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, stub: StubSearxServer) -> dict[str, str]:
    return serve_env(tmp_path_factory.mktemp("serve"), stub)


@pytest.fixture(scope="module")
def server(env: dict[str, str]) -> Iterator[ServeProcess]:
    with ServeProcess("--warm", "docs", env=env) as process:
        yield process


@pytest.fixture
def http(server: ServeProcess) -> Iterator[httpx.Client]:
    headers = {keys.API_KEY_HEADER: server.api_key}
    with httpx.Client(base_url=server.url, timeout=30, headers=headers) as client:
        yield client


def problems(response: httpx.Response) -> dict[str, str]:
    body = response.json()
    assert set(body) == {"error", "message", "problems"}, body
    return {p["field"]: p["problem"] for p in body["problems"]}


def tasks_written(env: dict[str, str]) -> int:
    with sqlite3.connect(env["FANFUSE_DB_PATH"]) as db:
        count: int = db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
    return count


def stored_key(env: dict[str, str], plaintext: str) -> ApiKey | None:
    key_id, _ = keys.parse_key(plaintext) or ("", "")
    store = SqliteStore(env["FANFUSE_DB_PATH"])
    try:
        return store.get_key(key_id)
    finally:
        store.close()


def test_port_0_prints_the_url_its_key_then_ready_and_sigterm_stops_it_cleanly(
    env: dict[str, str],
) -> None:
    process = ServeProcess("--warm", "none", env=env).start()
    lines = process.lines()
    url = next(line for line in lines if line.startswith("url "))
    assert url == f"url {process.url}"
    assert process.url.startswith("http://127.0.0.1:") and int(process.url.rsplit(":", 1)[1]) > 0
    key_line = f"api_key {process.api_key}"
    assert lines.index(url) < lines.index(key_line) < lines.index("ready")
    assert sum(process.api_key in line for line in lines) == 1  # printed once, logged never
    record = stored_key(env, process.api_key)
    assert record is not None and record.owner == "local" and record.revoked_at is None
    assert httpx.get(f"{process.url}/platforms").status_code == 401
    with_key = {keys.API_KEY_HEADER: process.api_key}
    assert httpx.get(f"{process.url}/platforms", headers=with_key).status_code == 200
    process.stop()
    assert process.process.returncode == 0
    assert process.lines()[-1] == "stopped"
    revoked = stored_key(env, process.api_key)
    assert revoked is not None and revoked.revoked_at is not None  # it died with its server


def test_callers_are_verified_as_the_functions_verify_them(
    server: ServeProcess, http: httpx.Client, env: dict[str, str]
) -> None:
    accepted = http.post("/start_search", json={"query": "laser", "platform": "docs"}).json()
    task_id = accepted["task_id"]
    assert http.get(accepted["status_url"]).json()["owner"] == "key:local"
    before = tasks_written(env)
    routes = [
        ("POST", "/start_search", {"query": "q", "platform": "docs"}),
        ("POST", "/search", {"query": "q", "platform": "docs"}),
        ("GET", f"/search_status/{task_id}", None),
        ("GET", f"/search_status/{task_id}/events", None),
        ("GET", "/search_status", None),
        ("POST", "/cancel_search", {"task_id": task_id}),
        ("GET", "/platforms", None),
    ]
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:
        for method, path, body in routes:
            for headers in ({}, {keys.API_KEY_HEADER: "ff_wrong"}):
                answer = anonymous.request(method, path, json=body, headers=headers)
                assert answer.status_code == 401, (path, answer.text)
                assert answer.json()["error"] == "unauthorized"
                assert "WWW-Authenticate" in answer.headers
        assert anonymous.get("/openapi.json").status_code == 200
        assert anonymous.get("/search_status/openapi.json").status_code == 200

        store = SqliteStore(env["FANFUSE_DB_PATH"])
        try:
            bob, bob_record = keys.new_key("bob", "", None, None, utcnow())
            store.put_key(bob_record)
            gone, gone_record = keys.new_key("carol", "", None, None, utcnow())
            store.put_key(keys.revoked(gone_record, utcnow()))
        finally:
            store.close()
        as_bob = {keys.API_KEY_HEADER: bob}  # another owner: the search does not exist for bob
        for answer in (
            anonymous.get(f"/search_status/{task_id}", headers=as_bob),
            anonymous.get(f"/search_status/{task_id}/events", headers=as_bob),
            anonymous.get("/search_status", params={"task_id": task_id}, headers=as_bob),
            anonymous.post("/cancel_search", json={"task_id": task_id}, headers=as_bob),
            anonymous.post("/cancel_search", params={"task_id": task_id}, headers=as_bob),
        ):
            assert answer.status_code == 404 and answer.json()["error"] == "not_found"
        revoked = anonymous.post(
            "/start_search", json={"query": "q"}, headers={keys.API_KEY_HEADER: gone}
        )
        assert revoked.status_code == 403 and revoked.json()["error"] == "forbidden"
    assert tasks_written(env) == before
    assert http.get(accepted["status_url"]).json()["status"] != "cancelled"


def test_start_status_cancel_round_trip(
    server: ServeProcess, http: httpx.Client, stub: StubSearxServer
) -> None:
    stub.reset()  # a closed gate
    started = http.post("/start_search", json={"query": "laser", "platform": "web_gate"})
    assert started.status_code == 202
    accepted = started.json()
    task_id = accepted["task_id"]
    assert accepted["status_url"] == f"{server.url}/search_status/{task_id}"
    assert accepted["cancel_url"] == f"{server.url}/cancel_search?task_id={task_id}"
    assert started.headers["Location"] == accepted["status_url"]
    try:
        running = http.get(accepted["status_url"])
        assert running.status_code == 200 and running.json()["status"] in ("pending", "running")
        by_query = http.get("/search_status", params={"task_id": task_id})
        assert by_query.json()["task_id"] == task_id
        cancelled = http.post(accepted["cancel_url"])
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        again = http.post("/cancel_search", json={"task_id": task_id})
        assert again.status_code == 409 and again.json()["error"] == "conflict"
        assert again.json()["message"] == f"search {task_id} is already cancelled"
    finally:
        stub.reset()


def test_search_endpoint_works_against_serve_unchanged(server: ServeProcess) -> None:
    endpoint = f"{server.url}/start_search"
    result = CliRunner().invoke(
        app,
        ["search", "microwave", "-p", "docs, web_ok", "--json", "--endpoint", endpoint],
        env={"FANFUSE_API_KEY": server.api_key},
    )
    assert result.exit_code == 0, result.output
    view = json.loads(result.stdout)
    assert view["status"] == "completed"
    assert {r["name"]: r["state"] for r in view["platform_runs"]} == {
        "docs": "succeeded",
        "web_ok": "succeeded",
    }
    assert view["results"][0]["url"].startswith("https://")


def test_post_search_answers_the_final_document(http: httpx.Client) -> None:
    answer = http.post("/search", json={"query": "plasma", "platform": "docs, web_slow"})
    assert answer.status_code == 200
    view = answer.json()
    assert view["status"] == "completed" and view["finalized_at"] is not None
    assert any(r["metadata"].get("doc_id") == "D4" for r in view["results"])


def test_bad_input_gets_400_naming_the_field_and_nothing_is_written(
    http: httpx.Client, env: dict[str, str]
) -> None:
    before = tasks_written(env)
    for target in ("/start_search", "/search"):
        bad = http.post(target, json={"query": ["a"] * 6, "platform": "docs,nope", "colour": 1})
        assert bad.status_code == 400 and bad.json()["error"] == "invalid_request"
        found = problems(bad)
        assert set(found) == {"query", "platform", "colour"}
        assert found["platform"].startswith("unknown platform 'nope'; available: docs")
        bad_json = http.post(target, content=b'{"query": ', headers=JSON)
        assert problems(bad_json)["body"].startswith("invalid JSON: Expecting value")
        as_text = http.post(target, content=b'{"query": "q"}', headers={"Content-Type": "x"})
        assert as_text.status_code == 415
        assert as_text.json()["error"] == "unsupported_media_type"
        assert problems(http.post(target, content=b"")) == {
            "body": "expected a JSON object, got nothing"
        }
    assert problems(http.post("/cancel_search", json={})) == {"task_id": "field required"}
    assert problems(http.post("/cancel_search", json={"task_id": "a", "x": 1})) == {
        "x": "unknown field"
    }
    assert set(problems(http.get("/search_status", params={"task_id": "../x y"}))) == {"task_id"}
    assert problems(http.get("/search_status")) == {"task_id": "field required"}
    assert tasks_written(env) == before


def test_404_405_413_as_the_functions_answer_them(http: httpx.Client) -> None:
    unknown = "0123456789abcdef0123456789abcdef"
    for response in (
        http.get(f"/search_status/{unknown}"),
        http.get(f"/search_status/{unknown}/events"),
        http.post("/cancel_search", params={"task_id": unknown}),
    ):
        assert response.status_code == 404, response.text
        assert response.json() == {
            "error": "not_found",
            "message": f"no search with task_id {unknown!r}",
            "problems": [],
        }
    wrong = http.get("/start_search")
    assert wrong.status_code == 405 and wrong.headers["Allow"] == "POST"
    assert wrong.json() == {
        "error": "method_not_allowed",
        "message": "start_search accepts POST, not GET",
        "problems": [],
    }
    assert http.post(f"/search_status/{unknown}").headers["Allow"] == "GET, HEAD"
    assert http.get("/cancel_search").status_code == 405
    assert http.delete("/search").status_code == 405
    for target in ("/start_search", "/search", "/cancel_search"):
        too_big = http.post(target, content=b"x" * 70_000)
        assert too_big.status_code == 413 and too_big.json()["error"] == "payload_too_large"
    assert http.get("/nowhere").json()["error"] == "not_found"


def events_of(http: httpx.Client, url: str) -> list[tuple[str, dict[str, Any]]]:
    """The (event, TaskView) pairs of one stream, read until the server closes it."""
    events: list[tuple[str, dict[str, Any]]] = []
    name = ""
    with http.stream("GET", url) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        for line in stream.iter_lines():
            if line.startswith("event:"):
                name = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line.removeprefix("data:").strip())))
    return events


def test_the_event_stream_follows_one_search_and_ends_with_the_terminal_document(
    http: httpx.Client,
) -> None:
    accepted = http.post(
        "/start_search",
        json={"query": "waves", "platform": "docs, web_slow", "cache": "bypass"},
    ).json()
    events = events_of(http, f"{accepted['status_url']}/events")
    names = [name for name, _ in events]
    assert names[-1] == "done" and set(names[:-1]) == {"progress"}, names
    assert len(events) >= 2  # at least one progress event before the end
    final = events[-1][1]
    assert final["status"] == "completed" and final["results"]
    assert final == http.get(accepted["status_url"]).json()
    percents = [view["progress"]["percent"] for _, view in events]
    assert percents == sorted(percents) and percents[-1] == 100


def id_events(
    http: httpx.Client, url: str, last_id: str | None = None, count: int | None = None
) -> list[tuple[str, str, dict[str, Any]]]:
    """The (event, id, TaskView) triples of one stream, resumed from `last_id` when given,
    read until the server closes it, or until `count` events (then the client drops it)."""
    headers = {"Last-Event-ID": last_id} if last_id else {}
    events: list[tuple[str, str, dict[str, Any]]] = []
    name = ident = ""
    with http.stream("GET", url, headers=headers) as stream:
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if line.startswith("event:"):
                name = line.removeprefix("event:").strip()
            elif line.startswith("id:"):
                ident = line.removeprefix("id:").strip()
            elif line.startswith("data:"):
                events.append((name, ident, json.loads(line.removeprefix("data:").strip())))
                if count is not None and len(events) == count:
                    break
    return events


def test_a_reconnect_with_last_event_id_gets_the_current_state_then_the_live_stream_to_done(
    http: httpx.Client, stub: StubSearxServer
) -> None:
    """Ids name states, not positions in one connection: a client that drops, misses events
    and comes back with `Last-Event-ID` gets the current state first (never one it has, never an
    older one), then the live stream to `done`; a terminal search answers `done` whatever the id."""
    stub.reset()  # closed gates: web_first ends when the test says, web_gate after it
    accepted = http.post(
        "/start_search",
        json={"query": "waves", "platform": "web_first, web_gate", "cache": "bypass"},
    ).json()
    url = f"{accepted['status_url']}/events"

    def first_state() -> str:
        runs = http.get(accepted["status_url"]).json()["platform_runs"]
        return str(next(run["state"] for run in runs if run["name"] == "web_first"))

    try:
        [(name, first_id, first)] = id_events(http, url, count=1)
        assert name == "progress" and first["status"] in ("pending", "running")
        assert {r["name"]: r["state"] for r in first["platform_runs"]}["web_first"] != "succeeded"
        stub.release("first")  # while the client is away
        give_up = time.monotonic() + 20
        while first_state() != "succeeded":  # missed while away: web_first ends
            assert time.monotonic() < give_up, "web_first did not finish"
            time.sleep(0.05)

        [(name, second_id, second)] = id_events(http, url, last_id=first_id, count=1)
        assert name == "progress" and second_id > first_id
        assert {r["name"]: r["state"] for r in second["platform_runs"]}["web_first"] == "succeeded"

        timer = threading.Timer(0.5, stub.release, args=("serve",))
        timer.start()
        try:
            live = id_events(http, url, last_id=second_id)
        finally:
            timer.join()
        names = [name for name, _, _ in live]
        ids = [ident for _, ident, _ in live]
        assert names[-1] == "done" and set(names[:-1]) <= {"progress"}, names
        assert ids == sorted(set(ids)) and ids[0] > second_id, ids  # nothing old, nothing twice
        final = live[-1][2]
        assert final["status"] == "completed" and final == http.get(accepted["status_url"]).json()

        for stale in (first_id, ids[-1], "not-an-id"):  # terminal: its done event, and closed
            assert id_events(http, url, last_id=stale) == [("done", ids[-1], final)]
    finally:
        stub.reset()


def test_platforms_lists_what_fanfuse_platforms_lists(
    http: httpx.Client, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        if name.startswith("FANFUSE_"):
            monkeypatch.setenv(name, value)
    listed = CliRunner().invoke(app, ["platforms", "--json"])
    assert http.get("/platforms").json() == json.loads(listed.stdout)
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["docs"]["available"] and rows["web_gate"]["available"]
    assert "FANFUSE_GOOGLE_API_KEY" in rows["google"]["reason"]


def test_openapi_json_is_the_checked_in_document_with_this_servers_limits(
    http: httpx.Client, env: dict[str, str]
) -> None:
    """The request's schema names the platforms available here and the deadline, and the API
    agrees with it both ways; everything else is docs/openapi.json."""
    served = http.get("/openapi.json")
    assert served.status_code == 200
    assert http.get("/search_status/openapi.json").json() == served.json()
    assert render() == CHECKED_IN.read_text(encoding="utf-8")
    rows = http.get("/platforms").json()
    available = tuple(row["name"] for row in rows if row["available"])
    known = tuple(row["name"] for row in rows)  # what a fallback chain may also list
    deadline = float(env["FANFUSE_DEADLINE_SECONDS"])
    served_here = Deployment(available, deadline, runnable=available, known=known)
    assert served.text == render(served_here)
    doc = served.json()
    check = jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/SearchRequest", "components": doc["components"]}
    )
    cases: list[tuple[dict[str, object], str]] = [
        ({"platform": "google"}, "platform"),  # known, not configured here
        ({"platform": "google|brave"}, "platform"),  # a chain none of whose members can run
        ({"platform": "docs", "weights": {"nope": 1}}, "weights"),
        ({"platform": "docs", "timeout_s": deadline + 0.5}, "timeout_s"),
    ]
    for fields, field in cases:
        body: dict[str, object] = {"query": "laser", **fields}
        assert not check.is_valid(body)
        refused = http.post("/start_search", json=body)
        assert refused.status_code == 400 and field in problems(refused), refused.text
    body = {"query": "laser", "platform": "DOCS", "weights": {"vectors": 2}, "timeout_s": deadline}
    assert check.is_valid(body)
    assert http.post("/start_search", json=body).status_code == 202
    chained = {"query": "laser", "platform": "google | docs, vectors", "hedge_after_s": 0.5}
    assert check.is_valid(chained)  # google is passed over at run time, saying why
    assert http.post("/start_search", json=chained).status_code == 202


async def test_past_the_cap_search_answers_the_running_document_and_the_stream_says_timeout(
    tmp_path: Path, stub: StubSearxServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap (the search's deadline + GRACE) is shortened to 0.2 s; the platform is gated."""
    from fanfuse.fronts.serve import watch
    from fanfuse.http.streams import for_service
    from fanfuse.runtimes.embedded import EmbeddedRuntime
    from fanfuse.settings import Settings

    monkeypatch.setattr(watch, "cap", lambda runtime, view: 0.2)
    stub.reset()
    settings = Settings.model_validate(
        {"db_path": tmp_path / "db", "extra_platforms": web_platforms(stub, WEB)}
    )
    try:
        async with EmbeddedRuntime(settings) as runtime:
            accepted = runtime.service.start({"query": "q", "platform": "web_gate"})
            view = await watch.settle(runtime, accepted.task_id)
            assert not view.status.terminal
            watchers = for_service(runtime.service, interval=0.05)
            sent = [e async for e in watch.events(runtime, watchers, accepted.task_id)]
            names = [e.decode().split("event: ")[1].split("\r\n")[0] for e in sent]
            assert names[-1] == "timeout" and set(names[:-1]) <= {"progress"}
            runtime.service.cancel(accepted.task_id)
            stub.reset()
    finally:
        stub.reset()


def test_bench_serve_fails_saying_why_when_vectors_is_unavailable(
    env: dict[str, str], tmp_path: Path
) -> None:
    from fanfuse.tools.bench.serve import ServeReport, measure_warm

    broken = {**env, "FANFUSE_VECTORS_CORPUS": str(tmp_path / "missing.trec")}
    with pytest.raises(RuntimeError) as caught:
        measure_warm(["laser"], broken, tmp_path / "logs")
    assert "cannot warm vectors (vectors: corpus not found" in str(caught.value)

    report = ServeReport(
        platforms=["docs", "vectors"], startup=9, warmup=0.3, warm=[0.1] * 9 + [0.5], cold=[8.0]
    )
    assert (report.warm_median, report.ratio) == (0.1, 80.0)
    assert report.warm_p90 == pytest.approx(0.14)


# -- issue 19: hostile bodies are cheap to refuse, and every malformed input a 4xx -----------


def names_body(count: int) -> bytes:
    """`platform` as `count` distinct three-letter names, comma-separated (16,000: 64 KB)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    names = [a + b + c for a in letters for b in letters for c in letters][:count]
    return json.dumps({"query": "q", "platform": ",".join(names)}).encode()


@asynccontextmanager
async def in_process(
    tmp_path: Path, **settings: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """serve's application in this process (its lifespan entered), over httpx's ASGI transport:
    the client, and the key it printed (for owner `local`, with `settings`' limits)."""
    from fanfuse.fronts.serve.app import create_app
    from fanfuse.platforms import Registry
    from fanfuse.settings import Settings
    from tests.support.fakes import FakePlatform

    printed: list[str] = []
    config = Settings.model_validate({"db_path": tmp_path / "serve.db", **settings})
    registry = Registry.of([FakePlatform("docs")])
    app = create_app(config, registry=registry, warm=[], on_key=printed.append)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            yield client, printed[0]


async def best_time(send: Callable[[], Awaitable[httpx.Response]], runs: int = 3) -> float:
    """The quickest of `runs` answers (seconds); each must be a 400."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        answer = await send()
        times.append(time.perf_counter() - start)
        assert answer.status_code == 400, answer.text
    return min(times)


async def test_a_64_kb_invalid_body_is_answered_400_within_50_ms_and_linearly(
    tmp_path: Path,
) -> None:
    """16,000 platform names: 0.9 s of the event loop before (a quadratic dedup); now a count.
    Against an 8 KB body of the same shape it costs at most twice as much per byte."""
    async with in_process(tmp_path, rate_per_minute=1000) as (client, key):
        headers = {keys.API_KEY_HEADER: key, **JSON}
        large, small = names_body(16_000), names_body(2_000)
        assert 60_000 < len(large) <= 64 * 1024 and len(large) / len(small) > 7.5

        def post(raw: bytes) -> Callable[[], Awaitable[httpx.Response]]:
            return lambda: client.post("/start_search", content=raw, headers=headers)

        first = await post(large)()
        assert problems(first) == {"platform": "at most 64 platform names per request, got 16000"}
        large_s = await best_time(post(large))
        assert large_s < 0.050, f"{large_s * 1000:.1f} ms"
        ratio = large_s / await best_time(post(small))
        assert ratio < 2 * len(large) / len(small), ratio


@pytest.mark.parametrize(
    ("body", "field", "problem"),
    [
        (b'{"query": "q", "max_results": ' + b"9" * 5000 + b"}", "body", "more than 4300 digits"),
        (b'{"query": "laser\\u0085"}', "query", "the control character U+0085"),
        (b'{"query": ["a", "b\\u202ec"]}', "query.1", "the bidi control U+202E"),
        (b'{"query": "a\\u200bb"}', "query", "the zero-width character U+200B"),
        (b'{"query": "q", "max_results": true}', "max_results", "valid integer"),
        (b'{"query": "q", "include_content": 1}', "include_content", "valid boolean"),
    ],
)
async def test_malformed_values_are_a_400_naming_the_field_at_serve(
    tmp_path: Path, body: bytes, field: str, problem: str
) -> None:
    async with in_process(tmp_path) as (client, key):
        answer = await client.post(
            "/start_search", content=body, headers={keys.API_KEY_HEADER: key, **JSON}
        )
    assert answer.status_code == 400, answer.text
    found = problems(answer)
    assert list(found) == [field] and problem in found[field], found


async def test_an_undecodable_bearer_token_is_a_401_at_serve(tmp_path: Path) -> None:
    """A token whose header is 1,500 nested `[`: a RecursionError in the decoder, a 503 before."""
    part = base64.urlsafe_b64encode(b"[" * 1500).rstrip(b"=").decode()
    bearer = {"Authorization": f"Bearer {part}.{part}.c2ln", **JSON}
    async with in_process(tmp_path, id_token_audiences=["https://fanfuse.example"]) as (
        client,
        _,
    ):
        for method, path in (("POST", "/start_search"), ("GET", "/platforms")):
            answer = await client.request(method, path, content=b'{"query": "q"}', headers=bearer)
            assert answer.status_code == 401, answer.text
            assert answer.json()["message"] == "ID token refused: it is not a well-formed JWT"


async def test_an_invalid_body_spends_a_rate_token_at_serve(tmp_path: Path) -> None:
    """A key of 2 starts a minute: the third request is a 429 though all three are invalid,
    and nothing is written."""
    async with in_process(tmp_path, rate_per_minute=2) as (client, key):
        headers = {keys.API_KEY_HEADER: key, **JSON}
        statuses = []
        for raw in (b'{"query": 1}', names_body(16_000), b'{"query": "q", "colour": 1}'):
            statuses.append(
                (await client.post("/start_search", content=raw, headers=headers)).status_code
            )
        refused = await client.post("/search", content=b'{"query": "q"}', headers=headers)
    assert statuses == [400, 400, 429]
    assert refused.status_code == 429 and "Retry-After" in refused.headers
    with sqlite3.connect(tmp_path / "serve.db") as db:
        assert db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 0


def test_20_hostile_bodies_at_once_delay_openapi_json_by_under_100_ms_of_serves_cpu(
    server: ServeProcess, env: dict[str, str]
) -> None:
    """A real `fanfuse serve` (uvicorn on 127.0.0.1): twenty 64 KB invalid bodies sent at
    once, and 20 ms later a GET /openapi.json. What serve spends while that GET waits, beyond
    what it spends on the GET alone, is under 100 ms. Before: 19.8 s (four bodies: 3.8 s).

    The delay is held in serve's CPU time (every thread, /proc), not in the wall-clock
    latency: on a shared 2-core machine at load 12 the same run measured 48 ms alone and 546
    ms with the twenty bodies, serve waiting its turn for a core; its CPU time is what the
    bodies cost it, whatever the load, and an upper bound of the delay on an idle machine.
    Both are printed. The key is this test's own, its rate far above twenty, so that every
    body is validated (no 429 shortcut)."""
    plaintext, record = keys.new_key("hostile", "", 10_000, None, utcnow())
    store = SqliteStore(env["FANFUSE_DB_PATH"])
    try:
        store.put_key(record)
    finally:
        store.close()
    headers = {keys.API_KEY_HEADER: plaintext, **JSON}
    raw = names_body(16_000)
    pid = server.process.pid

    async def measure() -> tuple[tuple[float, float], tuple[float, float]]:
        """(wall, serve's CPU) of the GET alone and with the bodies, medians."""
        limits = httpx.Limits(max_connections=32)
        async with httpx.AsyncClient(base_url=server.url, timeout=60, limits=limits) as client:

            async def openapi() -> tuple[float, float]:
                wall, cpu = time.perf_counter(), cpu_seconds(pid)
                assert (await client.get("/openapi.json")).status_code == 200
                return time.perf_counter() - wall, cpu_seconds(pid) - cpu

            await openapi()  # a connection open, the document rendered once
            alone = [await openapi() for _ in range(5)]
            loaded = []
            for _ in range(3):
                posts = [
                    asyncio.ensure_future(
                        client.post("/start_search", content=raw, headers=headers)
                    )
                    for _ in range(20)
                ]
                await asyncio.sleep(0.02)
                loaded.append(await openapi())
                answers = await asyncio.gather(*posts)
                assert {a.status_code for a in answers} == {400}
            return medians(alone), medians(loaded)

    def medians(times: list[tuple[float, float]]) -> tuple[float, float]:
        return statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)

    (alone_wall, alone_cpu), (loaded_wall, loaded_cpu) = asyncio.run(measure())
    figures = (
        f"alone {alone_wall * 1000:.1f} ms ({alone_cpu * 1000:.0f} ms of serve's CPU), with "
        f"20: {loaded_wall * 1000:.1f} ms ({loaded_cpu * 1000:.0f} ms of serve's CPU)"
    )
    print(f"\n{figures}")
    assert loaded_cpu - alone_cpu < 0.100, figures
