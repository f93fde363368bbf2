"""The search page for the local functions stack: serve's static page, from an origin of its own.

Why a process of its own: each function listens on its own port (as Cloud Functions deploys
them), so no target is "the" origin the page could come from. The child process is
`python -m fanfuse.fronts.serve.page`: the very files serve ships, with a `page/config.json`
naming each target's URL and no event stream (the page then polls `search_status`), and a CSP
whose `connect-src` allows exactly the targets' origins. The stack gives the functions this
page's origin as their one CORS origin (FANFUSE_CORS_ORIGINS, `fanfuse.http.cors`), so the
browser lets this page call them and no other page. Started by name, not imported: only the
CLI imports the serve front (tests/unit/test_layers.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path

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


def page_config(functions: Mapping[str, str]) -> dict[str, str | bool]:
    """What the page is told: each public target's URL; the platforms at `search_status`'s
    `/platforms`; no event stream (the functions have none)."""
    status = functions["search_status"].rstrip("/")
    return {
        "start_search": functions["start_search"],
        "search_status": status,
        "cancel_search": functions["cancel_search"],
        "platforms": f"{status}/platforms",
        "events": False,
    }


class PageProcess(Component):
    """The page server as a child process on 127.0.0.1; `url` is the page's, `origin` what the
    functions allow."""

    def __init__(
        self,
        functions: Mapping[str, str],
        port: int | None = None,
        *,
        log_dir: Path | None = None,
        startup_timeout: float = STARTUP_S,
    ) -> None:
        self.port = port or free_port()
        self.config = page_config(functions)
        self.startup_timeout = startup_timeout
        argv = [
            sys.executable,
            "-m",
            "fanfuse.fronts.serve.page",
            f"--host={LOOPBACK}",
            f"--port={self.port}",  # one argument, as the other components': findable in ps
            f"--config={json.dumps(self.config)}",
        ]
        log_path = (log_dir or default_log_dir()) / "page.log"
        self.process = ManagedProcess("page", argv, log_path=log_path)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/"

    @property
    def origin(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def launch(self) -> None:
        self.process.start()

    def wait_ready(self) -> None:
        wait_until(
            lambda: http_request("GET", self.url, timeout=1.0)[0] == 200,
            self.startup_timeout,
            "the page server",
            process=self.process,
        )
