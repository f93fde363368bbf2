"""The latency benchmark's parts: the stub SearXNG server and the report (no emulators)."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import httpx
import pytest
import typer
from typer.testing import CliRunner

from fanfuse.cli.bench import bench_app
from fanfuse.tools.bench.cache import run_cache
from fanfuse.tools.bench.latency import LatencyReport, LatencySeries, run_latency
from fanfuse.tools.bench.spent import spent_on
from fanfuse.tools.stubs import (
    DATE_STEP_DAYS,
    RESULTS_PER_PAGE,
    StubSearxServer,
    extra_platforms_env,
    parse_steps,
    stub_platforms,
)
from fanfuse.wire.timeline import RunTimeline, Timeline


def test_stub_answers_like_searxng_after_its_delay() -> None:
    with StubSearxServer() as stub, httpx.Client() as http:
        answer = http.get(stub.url("delay/0.05") + "/search", params={"q": "x", "format": "json"})
        assert answer.status_code == 200
        results = answer.json()["results"]
        assert len(results) == RESULTS_PER_PAGE
        assert {"url", "title", "content", "engine", "score"} <= set(results[0])
        assert results[0]["url"] == "https://stub.test/shared/1"  # shared by every platform
        page2 = http.get(stub.url("delay/5") + "/search", params={"q": "x", "pageno": 2})
        assert page2.json()["results"] == []  # later pages: empty and immediate
        assert http.get(stub.url("status/503") + "/search").status_code == 503
        assert http.get(stub.url("malformed") + "/search").text.startswith("<html>")
        assert stub.requests == {"delay/0.05": 1, "status/503": 1, "malformed": 1}


def test_stub_gate_holds_requests_until_released() -> None:
    with StubSearxServer() as stub, httpx.Client(timeout=10) as http:
        answers: list[int] = []
        worker = threading.Thread(
            target=lambda: answers.append(http.get(stub.url("gate/g") + "/search").status_code)
        )
        worker.start()
        deadline = time.monotonic() + 10
        while stub.waiting("g") < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert answers == []
        stub.release("g")
        worker.join(10)
        assert answers == [200]


def test_stub_fails_only_the_queries_with_the_marker() -> None:
    with StubSearxServer() as stub, httpx.Client() as http:
        url = stub.url("fail-query/zz500") + "/search"
        assert http.get(url, params={"q": "other zz500"}).status_code == 500
        ok = http.get(url, params={"q": "permittivity"})
        assert ok.status_code == 200 and len(ok.json()["results"]) == RESULTS_PER_PAGE
        assert stub.requests == {"fail-query/zz500": 2}


def test_stub_serves_results_on_chosen_hosts_with_dates() -> None:
    with StubSearxServer() as stub, httpx.Client() as http:
        answer = http.get(stub.url("domains/a.example,news.b.example") + "/search")
        results = answer.json()["results"]
        hosts = [urlsplit(r["url"]).hostname for r in results]
        assert hosts == ["a.example", "news.b.example"] * (RESULTS_PER_PAGE // 2)
        assert len({r["url"] for r in results}) == RESULTS_PER_PAGE
        ages = [datetime.now(UTC) - datetime.fromisoformat(r["publishedDate"]) for r in results]
        assert ages[0] < timedelta(days=1) and ages[-1] > timedelta(days=DATE_STEP_DAYS * 8)


def test_stub_steps_combine_and_anything_else_is_a_404() -> None:
    assert parse_steps("fail-query/zz500/delay/0.2") == [("fail-query", "zz500"), ("delay", "0.2")]
    assert parse_steps("delay/0") == [("delay", "0")]
    for bad in ("", "delay", "delay/x", "delay/-1", "status/9", "nope/1", "delay/0/extra"):
        assert parse_steps(bad) is None, bad
    with StubSearxServer() as stub, httpx.Client() as http:
        combined = stub.url("domains/c.example/fail-query/zz/delay/0.01") + "/search"
        assert http.get(combined, params={"q": "a zz"}).status_code == 500
        hit = http.get(combined, params={"q": "fine"}).json()["results"][0]
        assert urlsplit(hit["url"]).hostname == "c.example"
        assert http.get(stub.url("delay/0/extra") + "/search").status_code == 404
        assert http.get(stub.url("status/500/malformed") + "/search").status_code == 500


def test_stub_platforms_are_searxng_instances_for_another_process() -> None:
    with StubSearxServer() as stub:
        platforms = stub_platforms(stub, [0.2, 1.0])
        assert list(platforms) == ["stub_0_2", "stub_1"]
        assert platforms["stub_1"].engine == "searxng"
        assert platforms["stub_1"].settings["base_url"] == stub.url("delay/1")
        assert '"stub_0_2": {"engine": "searxng"' in extra_platforms_env(platforms)


def test_report_ratios_and_targets() -> None:
    report = LatencyReport(
        delays=[0.2, 0.5, 1.0],
        runs=3,
        poll=0.05,
        series=[
            LatencySeries(runtime="embedded", warmup=1.5, samples=[1.05, 1.10, 1.07]),
            LatencySeries(runtime="emulator", warmup=6.0, samples=[1.6, 1.4, 1.55]),
            LatencySeries(runtime="aws", warmup=3.0, samples=[1.1, 1.2, 1.15]),
            LatencySeries(runtime="sequential", warmup=1.8, samples=[1.8, 1.75, 1.85]),
        ],
    )
    ratios = report.ratios()
    assert round(ratios["embedded"][0], 2) == 1.07
    assert round(ratios["sequential"][1] or 0, 2) == 1.0
    text = report.render()
    assert "target embedded <= 1.15x the limit: met (1.07x)" in text
    assert "target emulator <= 1.2x the limit: MISSED (1.55x)" in text
    assert "target aws <= 1.2x the limit: met (1.15x)" in text


def test_the_first_preview_is_a_column_and_a_json_field_per_runtime() -> None:
    embedded = LatencySeries(
        runtime="embedded", warmup=1.5, samples=[1.05, 1.1, 1.07], first_preview=[0.3, 0.22, 0.25]
    )
    sequential = LatencySeries(runtime="sequential", warmup=1.8, samples=[1.8, 1.75, 1.85])
    report = LatencyReport(delays=[0.2, 1.0], runs=3, poll=0.05, series=[embedded, sequential])
    header, first, last = report.render().splitlines()[1:4]
    assert header.endswith("1st preview")
    assert first.startswith("embedded") and first.endswith("0.250s")
    assert last.startswith("sequential") and last.endswith(" -")
    data = json.loads(report.model_dump_json())
    assert data["series"][0]["first_preview"] == [0.3, 0.22, 0.25]
    assert data["series"][1]["first_preview"] == []


def test_embedded_and_sequential_runs_measure_the_fan_out() -> None:
    report = run_latency([0.05, 0.2], runs=2, poll=0.01, stack=False, aws=False)
    assert [s.runtime for s in report.series] == ["embedded", "sequential"]
    embedded, sequential = report.series
    assert len(embedded.samples) == 2
    # Only the physical lower bounds: no wall-clock comparison in a test (shared, noisy machines).
    # That the platforms really overlap is proven deterministically in test_embedded (a barrier).
    assert embedded.median >= 0.2  # the slowest platform
    assert sequential.median >= 0.25  # the sum of the delays
    # the first results come with the quickest platform, before the slowest one is done
    assert len(embedded.first_preview) == 2 and sequential.first_preview == []
    assert all(
        0.05 <= p <= t for p, t in zip(embedded.first_preview, embedded.samples, strict=True)
    )


def test_the_cache_bench_runs_both_series_and_the_cached_one_asks_no_platform() -> None:
    report = run_cache([0.01, 0.05], runs=2, poll=0.01)
    uncached, cached = report.get("uncached"), report.get("cached")
    assert len(uncached.samples) == len(cached.samples) == 2
    assert len(uncached.in_store) == len(cached.in_store) == 2
    assert uncached.requests == 3 * 2  # warm-up and two runs, two platforms each
    assert cached.requests == 0
    assert uncached.median >= 0.05  # the slowest platform; no wall-clock comparison here
    text = report.render()
    assert "uncached / cached (medians): " in text and "poll every 0.01 s" in text


def test_the_cli_is_a_bench_group_with_latency_and_cache_commands() -> None:
    app = typer.Typer()
    app.add_typer(bench_app, name="bench")

    @app.command()
    def other() -> None: ...

    runner = CliRunner()
    result = runner.invoke(app, ["bench", "latency", "--help"])
    assert result.exit_code == 0, result.output
    assert "--runs" in result.output and "--delays" in result.output
    result = runner.invoke(app, ["bench", "latency", "--delays", "a,b"])
    assert result.exit_code == 2 and "not a list of numbers" in result.output
    result = runner.invoke(
        app, ["bench", "latency", "--delays", "0.01,0.05", "--runs", "1", "--no-stack", "--no-aws"]
    )
    assert result.exit_code == 0, result.output
    assert "target embedded <= 1.15x the limit" in result.output
    result = runner.invoke(app, ["bench", "cache", "--help"])
    assert result.exit_code == 0, result.output
    assert "--runs" in result.output and "--poll" in result.output
    result = runner.invoke(app, ["bench", "cache", "--delays", "-1"])
    assert result.exit_code == 2 and "none negative" in result.output


def test_the_timeline_says_where_the_time_around_the_slowest_platform_went() -> None:
    kept = Timeline(
        runs=[
            RunTimeline(platform="a", state="succeeded", queued=0.05, started=0.06,
                        working=0.07, stages={"searching": 0.2}, finished=0.3),
            RunTimeline(platform="b", state="succeeded", queued=0.05, started=0.08,
                        working=0.1, stages={"searching": 1.0}, finished=1.13),
        ],
        fan_in=1.13,
        finalized=1.13,
        finalized_by="fan_in",
    )  # fmt: skip
    spent = spent_on(kept, 1.2)
    assert {k: round(v, 3) for k, v in spent.items()} == {
        "start": 0.05, "dispatch": 0.03, "claim": 0.02, "stages": 1.0,
        "fan_in": 0.03, "finalize": 0.0, "seen": 0.07,
    }  # fmt: skip
    assert sum(spent.values()) == pytest.approx(1.2)  # every moment accounted for
    assert spent_on(Timeline(), 1.0) == {}  # not final: nothing to say


def test_the_report_prints_the_tracing_overhead_the_round_trips_and_the_load() -> None:
    off = LatencySeries(runtime="emulator", warmup=6.0, samples=[1.2, 1.3, 1.25])
    on = LatencySeries(runtime="emulator", warmup=6.0, samples=[1.3, 1.4, 1.35])
    report = LatencyReport(
        delays=[1.0],
        runs=3,
        poll=0.05,
        series=[off],
        traced=[on],
        round_trips={"emulator": [7, 7, 8]},
        load=[0.8, 1.1],
    )
    text = report.render()
    assert "emulator   off 1.250s  on 1.350s  overhead 1.08x" in text
    assert "(emulator, delivery -> fan-in committed): median 7, min 7, max 8" in text
    assert "load average (1 min): 0.80 before, 1.10 after: quiet" in text
    busy = report.model_copy(update={"load": [3.0, 2.0]})
    assert "NOT quiet" in busy.render()
