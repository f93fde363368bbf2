"""`fanfuse bench hedging` on a small run: the tail lands where the stub says, the unhedged
series waits it out, the hedged one is answered by the fallback. (Its figures are the bench's
to report: nothing here holds the machine to a time.)"""

from __future__ import annotations

import json
import time

import httpx
from typer.testing import CliRunner

from fanfuse.cli.main import app
from fanfuse.tools.bench.hedging import run_hedging
from fanfuse.tools.stubs import StubSearxServer, parse_steps


def test_the_tail_step_slows_every_nth_request_and_is_checked() -> None:
    assert parse_steps("tail/10:2.8/delay/0.2") == [("tail", "10:2.8"), ("delay", "0.2")]
    for bad in ("tail/10", "tail/0:1", "tail/x:1", "tail/2:-1"):
        assert parse_steps(bad) is None, bad
    with StubSearxServer() as stub, httpx.Client() as client:
        took = []
        for _ in range(2):
            started = time.monotonic()
            client.get(stub.url("tail/2:0.3") + "/search", params={"q": "x"})
            took.append(time.monotonic() - started)
        assert stub.requests["tail/2:0.3"] == 2
        assert took[1] >= 0.3  # the second request is the tail (the first may be slow too)


def test_the_hedged_series_is_answered_by_the_fallback_when_the_primary_is_slow() -> None:
    report = run_hedging(4, 2, base_s=0.05, slow_s=1.0, fallback_s=0.05, hedge_s=0.2)
    unhedged, hedged = report.get("unhedged"), report.get("hedged")
    assert len(unhedged.samples) == len(hedged.samples) == 4
    assert unhedged.fallback_answers == 0 and unhedged.calls == 4
    assert hedged.fallback_answers >= 2  # the two slow primaries, at least
    assert hedged.calls >= 4 + hedged.fallback_answers  # each hedge is a call more
    assert unhedged.hedge_after_s == "off" and hedged.hedge_after_s == 0.2
    rendered = report.render()
    assert "unhedged p95 / hedged p95:" in rendered and "1 request in 2 in 1.05 s" in rendered


def test_the_command_prints_the_report_as_json() -> None:
    args = ["bench", "hedging", "--searches", "2", "--every", "2", "--slow", "0.3", "--json"]
    result = CliRunner().invoke(app, [*args, "--hedge", "0.1"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [s["series"] for s in data["series"]] == ["unhedged", "hedged"]
    assert data["searches"] == 2 and data["every"] == 2
