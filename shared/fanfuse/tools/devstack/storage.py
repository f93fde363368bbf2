"""A Cloud Storage emulator (PyPI's gcp-storage-emulator), bound to 127.0.0.1, in memory.

The bucket of the published corpora on the Google Cloud side of the local stacks: the tests and
the deploy rehearsal publish to it with `fanfuse index --publish gs://...` and the functions read
from it, both through google-cloud-storage pointed at it by STORAGE_EMULATOR_HOST (the
client's own setting: no fanfuse code knows it is an emulator).

What it does not do, checked here once: it ignores write preconditions (`ifGenerationMatch=0`
replaces an existing object instead of answering 412), so the rule that a version's objects are
never rewritten is tested on moto's S3, which refuses as S3 does, and on a folder.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from google.cloud.storage import Client


def _emulator_command() -> str:
    """The emulator's script beside this interpreter (a venv's bin), else on PATH; a missing
    one fails with what to install, never skips."""
    beside = Path(sys.executable).parent / "gcp-storage-emulator"
    found = str(beside) if beside.exists() else shutil.which("gcp-storage-emulator")
    if found is None:
        raise RuntimeError(
            "gcp-storage-emulator not found: pip install 'fanfuse[dev]' (it is in the dev extra)"
        )
    return found


class StorageEmulator(Component):
    """gcp-storage-emulator on 127.0.0.1, objects kept in memory only."""

    def __init__(
        self,
        port: int | None = None,
        *,
        buckets: tuple[str, ...] = (),
        log_dir: Path | None = None,
        startup_timeout: float = STARTUP_S,
    ) -> None:
        self.port = port or free_port()
        self.buckets = buckets
        self.startup_timeout = startup_timeout
        self.process = ManagedProcess(
            "storage",
            [],  # filled in by launch(), after the emulator is found
            env=dict(os.environ),
            log_path=(log_dir or default_log_dir()) / "storage.log",
        )

    @property
    def host(self) -> str:
        """What STORAGE_EMULATOR_HOST must be set to."""
        return f"http://{LOOPBACK}:{self.port}"

    def _ready(self) -> bool:
        return http_request("GET", f"{self.host}/storage/v1/b", timeout=1.0)[0] == 200

    def launch(self) -> None:
        self.process.argv = [
            _emulator_command(),
            "start",
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
            "--in-memory",
            "--quiet",
        ]
        self._started_at = time.monotonic()
        self.process.start()

    def wait_ready(self) -> None:
        wait_until(
            self._ready, self.startup_timeout, "Cloud Storage emulator", process=self.process
        )
        for bucket in self.buckets:
            self.create_bucket(bucket)

    def client(self) -> Client:
        """A google-cloud-storage client on this emulator (anonymous, as the client makes it
        when STORAGE_EMULATOR_HOST is set: set for that moment only)."""
        from google.cloud import storage

        previous = os.environ.get("STORAGE_EMULATOR_HOST")
        os.environ["STORAGE_EMULATOR_HOST"] = self.host
        try:
            return storage.Client(project="demo-fanfuse")
        finally:
            if previous is None:
                del os.environ["STORAGE_EMULATOR_HOST"]
            else:
                os.environ["STORAGE_EMULATOR_HOST"] = previous

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(name)
