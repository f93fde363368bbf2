"""`fanfuse bench budget`: a bounded run gives every series and the ratios the report states."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from fanfuse.cli.bench import bench_app
from fanfuse.tools.bench.budget import SERIES, BudgetReport


def test_the_command_times_every_case_and_states_the_ratios() -> None:
    result = CliRunner().invoke(bench_app, ["budget", "--runs", "1", "--searches", "2", "--json"])
    assert result.exit_code == 0, result.output
    report = BudgetReport.model_validate(json.loads(result.output))
    cases = {(s.what, s.case) for s in report.series}
    assert cases == {
        *(("search", c) for c in SERIES),
        *(("start", c) for c in SERIES),
        ("check", "cap"),
        ("check", "daily"),
    }
    assert all(len(s.samples) == 1 and s.median > 0 for s in report.series)
    text = report.render()
    assert "search (median of paired runs' ratios): with a cap / without budgets = " in text
    assert "the check alone, daily: " in text and "% of a search without budgets" in text
