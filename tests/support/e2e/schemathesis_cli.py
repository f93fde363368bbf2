"""schemathesis' own CLI, `--checks all`, against a running API: what the serve and the functions
tests share (tests/e2e/test_e2e_schemathesis_serve.py, test_e2e_schemathesis.py).

Two runs per API: the examples, coverage and fuzzing phases, then the stateful phase alone with
a HAR report, from which `stateful_calls` reads what the phase sent (so a test can say it went
from a started search to its cancel through the document's links, with a real task id). Each
run must end with no failure and no error; its output is printed (the key shown as
$FANFUSE_API_KEY) and written to the test's tmp dir.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from fanfuse.auth import keys

UNIT_PHASES = "examples,coverage,fuzzing"
KEY_SHOWN_AS = "$FANFUSE_API_KEY"


@dataclass(frozen=True)
class Run:
    command: list[str]
    output: str
    returncode: int

    def generated(self) -> int:
        found = re.search(r"Test cases:\s*\n\s*(\d+) generated", self.output)
        return int(found.group(1)) if found else 0

    def phase_passed(self, phase: str) -> bool:
        """Whether `phase`'s block says some of its cases passed (not all skipped)."""
        block = re.search(rf"{phase} \(in [^)]*\)\s*\n\s*\n\s*(.+)", self.output)
        return block is not None and "passed" in block.group(1)

    def failed(self) -> bool:
        summary = self.output.rsplit("SUMMARY", 1)[-1]
        return self.returncode != 0 or bool(re.search(r"\d+ (failures?|errors?)", summary))


def cli() -> str:
    return shutil.which("schemathesis") or str(Path(sys.executable).with_name("schemathesis"))


def run(
    schema_url: str,
    key: str,
    tmp: Path,
    phases: str,
    *,
    base_url: str | None = None,
    max_examples: int,
    seed: str,
    timeout: float,
) -> Run:
    """`schemathesis run` of `phases` with every check, the key in X-Api-Key; `base_url` None:
    the document's own servers (a function deployment names one per path)."""
    report_dir = tmp / phases.replace(",", "-")
    command = [
        cli(),
        "run",
        schema_url,
        *(["--url", base_url] if base_url else []),
        "--checks",
        "all",
        "--phases",
        phases,
        "--max-examples",
        str(max_examples),
        "--seed",
        seed,
        "--request-timeout",
        "30",
        "--no-color",
        "--report",
        "junit,har",
        "--report-dir",
        str(report_dir),
        "-H",
        f"{keys.API_KEY_HEADER}: {key}",
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=tmp, check=False
    )
    output = (done.stdout + done.stderr).replace(key, KEY_SHOWN_AS)
    shown = [*command[:-1], f"{keys.API_KEY_HEADER}: {KEY_SHOWN_AS}"]
    print(f"\n{' '.join(shown)}\n{output[-3000:]}")
    (tmp / f"schemathesis-{phases.replace(',', '-')}.txt").write_text(output)
    return Run(shown, output, done.returncode)


def stateful_calls(tmp: Path) -> Counter[tuple[str, str, int]]:
    """(method, operation path, status) of every request of the stateful run's HAR report,
    counted; a task id in a path is shown as `{task_id}`."""
    calls: Counter[tuple[str, str, int]] = Counter()
    for report in (tmp / "stateful").glob("har-*"):
        for entry in json.loads(report.read_text())["log"]["entries"]:
            url = entry["request"]["url"].split("?")[0]
            path = "/" + url.split("//", 1)[1].partition("/")[2]
            path = re.sub(r"^/search_status/[^/]+", "/search_status/{task_id}", path)
            calls[(entry["request"]["method"], path, entry["response"]["status"])] += 1
    return calls
