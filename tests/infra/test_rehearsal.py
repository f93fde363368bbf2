"""Both deploy rehearsals run in CI (issue 20): each builds its artifact, installs it into a clean
environment, starts the functions with Terraform's rendered environment and searches through the
public API. A missing prerequisite (the runtime's Python, gcloud, Java) fails, never skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
@pytest.mark.timeout(420)
def test_the_deploy_rehearsal_passes(cloud: str) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        [str(ROOT / "scripts" / "deploy-rehearsal"), cloud],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    tail = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, tail
    assert done.stdout.rstrip().splitlines()[-1] == "rehearsal ok", tail
