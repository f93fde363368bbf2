"""`fanfuse serve --port 0` as a child process: for `fanfuse bench serve` and the tests of serve.

What a parent does with the server: start it in its own session (a `ManagedProcess`, so a stop
reaches everything it started), read its `url` and `api_key` lines, wait for its `ready` line,
stop it with SIGTERM. Its stdout and stderr go to one log file, which the lines are read from
and whose tail a failure quotes.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from fanfuse.tools.devstack.processes import (
    LOOPBACK,
    STARTUP_S,
    Component,
    ManagedProcess,
    default_log_dir,
    wait_until,
)


class ServeProcess(Component):
    """`fanfuse serve --host 127.0.0.1 --port 0 ARGS`; `url` and `api_key` (the key it printed,
    for owner `local`) are set once it is ready."""

    def __init__(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        timeout: float = STARTUP_S,
        log_dir: Path | None = None,
    ) -> None:
        argv = [
            sys.executable,
            "-m",
            "fanfuse.cli.main",
            "serve",
            "--host",
            LOOPBACK,
            "--port",
            "0",
        ]
        log_path = (log_dir or default_log_dir()) / "serve.log"
        self.process = ManagedProcess("serve", [*argv, *args], env=env, log_path=log_path)
        self.timeout = timeout
        self.url = ""
        self.api_key = ""

    def lines(self) -> list[str]:
        """Every line the server has written so far (stdout and stderr)."""
        try:
            return self.process.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return []

    def launch(self) -> None:
        self.process.start()

    def wait_ready(self) -> None:
        wait_until(
            lambda: "ready" in self.lines(),
            self.timeout,
            "fanfuse serve",
            interval=0.05,
            process=self.process,
        )
        self.url = self._line("url ")
        self.api_key = self._line("api_key ")

    def _line(self, prefix: str) -> str:
        return next(ln for ln in self.lines() if ln.startswith(prefix)).removeprefix(prefix)
