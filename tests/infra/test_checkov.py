"""checkov on infra/: no failed check, and every skip explained (inline and in the baseline).

checkov lives in its own virtualenv (.venv-checkov: its pins clash with the project's). Missing
checkov is a failure, not a skip. It runs offline: no Prisma Cloud download, no update check,
and only the terraform and secrets frameworks (others probe local tools such as kubectl).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
BASELINE = INFRA / "checkov-baseline.md"
INSTALL = "python3 -m venv .venv-checkov && .venv-checkov/bin/pip install 'checkov==3.3.30'"


def checkov_binary() -> str:
    candidates = [os.environ.get("CHECKOV_BIN"), str(REPO / ".venv-checkov" / "bin" / "checkov")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    found = shutil.which("checkov")
    if found is None:
        pytest.fail(f"checkov is not installed; install it with: {INSTALL}")
    return found


@pytest.fixture(scope="module")
def reports() -> list[dict[str, Any]]:
    env = {
        **os.environ,
        "BC_SKIP_MAPPING": "TRUE",
        "CKV_SKIP_PACKAGE_UPDATE_CHECK": "TRUE",
        "LOG_LEVEL": "WARNING",
    }
    command = [checkov_binary(), "--directory", str(INFRA), "--skip-download", "--output", "json"]
    command += ["--framework", "terraform", "secrets"]
    proc = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    parsed = json.loads(proc.stdout)
    return parsed if isinstance(parsed, list) else [parsed]


def baseline() -> set[tuple[str, str]]:
    # A resource address may hold a for_each key with spaces (`targets["ANY /{target}"]`).
    rows = re.findall(r"^\| (CKV2?_\w+) \| ([^|]+?) \|", BASELINE.read_text(), re.M)
    return set(rows)


def test_checkov_scanned_the_terraform(reports: list[dict[str, Any]]) -> None:
    terraform = [r for r in reports if r.get("check_type") == "terraform"]
    assert terraform, reports
    summary = terraform[0]["summary"]
    assert summary["resource_count"] > 20, summary
    assert summary["passed"] > 20, summary
    assert summary["parsing_errors"] == 0, summary


def test_no_failed_check(reports: list[dict[str, Any]]) -> None:
    failed = [
        f"{c['check_id']} {c['resource']} ({c['file_path']}): {c['check_name']}"
        for r in reports
        for c in r["results"]["failed_checks"]
    ]
    assert failed == []


def test_every_skip_is_explained_and_listed(reports: list[dict[str, Any]]) -> None:
    skipped = [c for r in reports for c in r["results"]["skipped_checks"]]
    for check in skipped:
        reason = (check.get("check_result") or {}).get("suppress_comment") or ""
        assert len(reason) > 20, f"{check['check_id']} on {check['resource']} has no real reason"
    found = {(c["check_id"], c["resource"]) for c in skipped}
    assert found == baseline(), "infra/checkov-baseline.md and the inline skips disagree"
