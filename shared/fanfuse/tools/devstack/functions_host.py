"""Each Cloud Function target as its own functions-framework (gunicorn) process on 127.0.0.1.

One process per target, as Cloud Functions deploys them, so a test sees what each target imports
and a crash in one leaves the others running.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from fanfuse.http import routes
from fanfuse.tools.devstack.processes import (
    LOOPBACK,
    STARTUP_S,
    Component,
    ManagedProcess,
    default_log_dir,
    free_port,
    http_request,
    wait_until,
)

FUNCTION_TARGETS = routes.FUNCTION_TARGETS
"""One functions-framework process per target, as the cloud deploys one function per target."""
REPO_ROOT = Path(__file__).resolve().parents[4]
"""shared/fanfuse/tools/devstack/functions_host.py -> the repository root."""
DEFAULT_FUNCTIONS_SOURCE = REPO_ROOT / "functions" / "main.py"


def _functions_framework() -> str:
    """The functions-framework script of this interpreter's environment (PATH as a fallback)."""
    beside = Path(sys.executable).parent / "functions-framework"
    if beside.exists():
        return str(beside)
    found = shutil.which("functions-framework")
    if found is None:
        raise RuntimeError("functions-framework not found: pip install 'fanfuse[cloud]'")
    return found


class FunctionProcess(Component):
    """One function target under functions-framework (gunicorn) on 127.0.0.1."""

    def __init__(
        self,
        target: str,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        *,
        source: Path = DEFAULT_FUNCTIONS_SOURCE,
        log_dir: Path | None = None,
        startup_timeout: float = STARTUP_S,
    ) -> None:
        self.target = target
        self.port = port or free_port()
        self.source = Path(source)
        self.extra_env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.startup_seconds: float | None = None
        log_dir = log_dir or default_log_dir()
        self.process = ManagedProcess(
            target,
            [],  # filled in by launch()
            log_path=log_dir / f"{target}.log",
        )

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def _ready(self) -> bool:
        # functions-framework answers /robots.txt with 404 without calling the function, and
        # only listens once the source imported, so any HTTP answer means "loaded".
        status, _ = http_request("GET", self.url + "/robots.txt", timeout=1.0)
        return status > 0

    def launch(self) -> None:
        if not self.source.exists():
            raise RuntimeError(f"function source {self.source} does not exist")
        self.process.argv = [
            _functions_framework(),
            f"--target={self.target}",
            f"--source={self.source}",
            f"--host={LOOPBACK}",
            f"--port={self.port}",
        ]
        self.process.env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.extra_env}
        self._started_at = time.monotonic()
        self.process.start()

    def wait_ready(self) -> None:
        wait_until(
            self._ready, self.startup_timeout, f"function {self.target}", process=self.process
        )
        self.startup_seconds = time.monotonic() - self._started_at
