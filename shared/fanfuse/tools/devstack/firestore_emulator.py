"""The official Firestore emulator (`gcloud emulators firestore start`), bound to 127.0.0.1.

Its prerequisites (gcloud, Java, the emulator component) are checked before anything starts, and
a missing one fails with what to install: a machine that cannot run the emulator must not pass
the emulator tests by skipping them.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fanfuse.tools.devstack.processes import (
    DEFAULT_PROJECT,
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
    from google.cloud.firestore import Client


def _firestore_prerequisites() -> str:
    """Path of gcloud, after checking java and the emulator component: fail loudly, never skip."""
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        raise RuntimeError(
            "gcloud not found on PATH: install google-cloud-cli and "
            "google-cloud-cli-firestore-emulator (the Firestore emulator ships with it)"
        )
    java = os.environ.get("JAVA") or shutil.which("java")
    if java is None:
        raise RuntimeError("java not found on PATH: the Firestore emulator needs a Java 17+ JRE")
    sdk_root = Path(os.path.realpath(gcloud)).parent.parent
    jar = sdk_root / "platform" / "cloud-firestore-emulator" / "cloud-firestore-emulator.jar"
    if not jar.exists():
        raise RuntimeError(
            f"Firestore emulator component missing ({jar} not found): install "
            "google-cloud-cli-firestore-emulator, or `gcloud components install "
            "cloud-firestore-emulator`"
        )
    return gcloud


WARM_UP_COLLECTION = "fanfuse-warm-up"
"""Where start-up writes its first document (and deletes it): no store reads it."""
WARM_UP_CALL_S = 60.0
"""The bound on each warm-up call (a cold emulator's first write on a busy machine)."""


class FirestoreEmulator(Component):
    """The official Firestore emulator (`gcloud emulators firestore start`) on 127.0.0.1."""

    def __init__(
        self,
        project: str = DEFAULT_PROJECT,
        port: int | None = None,
        *,
        log_dir: Path | None = None,
        startup_timeout: float = STARTUP_S,
    ) -> None:
        self.project = project
        self.port = port or free_port()
        self.startup_timeout = startup_timeout
        self.startup_seconds: float | None = None
        log_dir = log_dir or default_log_dir()
        self.process = ManagedProcess(
            "firestore",
            [],  # filled in by start(), after the prerequisites are checked
            env={**os.environ, "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"},
            log_path=log_dir / "firestore.log",
        )

    @property
    def host(self) -> str:
        """What FIRESTORE_EMULATOR_HOST must be set to."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def _ready(self) -> bool:
        return http_request("GET", self.url + "/", timeout=1.0)[0] == 200

    def launch(self) -> None:
        gcloud = _firestore_prerequisites()
        self.process.argv = [
            gcloud,
            "emulators",
            "firestore",
            "start",
            f"--host-port={self.host}",
            f"--project={self.project}",
            "--quiet",
        ]
        self._started_at = time.monotonic()
        self.process.start()

    def _writes(self) -> bool:
        """One document written and deleted through the gRPC API, as the stores write.

        GET / answers once the JVM listens, but its first write still loads the storage and
        gRPC classes: on a busy 2-core machine that took over 10 s, past the stores' own
        deadline, so the first put of whoever came next failed (504). A write here moves
        that cost into start-up, where `startup_timeout` bounds it.
        """
        client = self.client()
        try:
            document = client.collection(WARM_UP_COLLECTION).document("ready")
            document.set({"at": time.time()}, timeout=WARM_UP_CALL_S)
            document.delete(timeout=WARM_UP_CALL_S)
        finally:
            client.close()  # type: ignore[no-untyped-call]  # google-cloud-firestore: unannotated
        return True

    def wait_ready(self) -> None:
        """Ready when GET / answers 200 (about 4 s of JVM start-up on 2 cores) and a first
        document has been written and deleted."""
        wait_until(self._ready, self.startup_timeout, "Firestore emulator", process=self.process)
        left = self.startup_timeout - (time.monotonic() - self._started_at)
        wait_until(
            self._writes, max(left, WARM_UP_CALL_S), "Firestore's first write", process=self.process
        )
        self.startup_seconds = time.monotonic() - self._started_at

    def client(self) -> Client:
        """A google-cloud-firestore client on this emulator.

        The client reads FIRESTORE_EMULATOR_HOST once, when it is built, and has no argument
        for it: the variable is set for that moment only, then put back as it was.
        """
        from google.cloud import firestore

        previous = os.environ.get("FIRESTORE_EMULATOR_HOST")
        os.environ["FIRESTORE_EMULATOR_HOST"] = self.host
        try:
            return firestore.Client(project=self.project)
        finally:
            if previous is None:
                del os.environ["FIRESTORE_EMULATOR_HOST"]
            else:
                os.environ["FIRESTORE_EMULATOR_HOST"] = previous

    def reset(self) -> None:
        """Delete every document of the project's default database (fast: no restart)."""
        url = f"{self.url}/emulator/v1/projects/{self.project}/databases/(default)/documents"
        status, body = http_request("DELETE", url)
        if status != 200:
            raise RuntimeError(f"Firestore emulator reset failed: {status} {body[:300]!r}")

    def load_rules(self, text: str) -> None:
        """Install security rules; they apply to client (non-admin) REST calls only."""
        payload = json.dumps({"rules": {"files": [{"content": text}]}}).encode()
        status, body = http_request(
            "PUT",
            f"{self.url}/emulator/v1/projects/{self.project}:securityRules",
            payload,
            {"Content-Type": "application/json"},
        )
        if status != 200:
            raise ValueError(f"Firestore emulator rejected the rules: {status} {body[:1000]!r}")
