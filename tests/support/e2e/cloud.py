"""What the end-to-end tests share: the platforms, the corpus, and `Cloud`, the running stack.

The cloud path end to end: the official Firestore emulator, the Cloud Tasks emulator driven by
the official client, and the five functions as real functions-framework processes.

One stack per session (starting it costs seconds, the vectors model load in the worker a few
more); Firestore is wiped and every queue resumed before each test. Nothing here skips: without
Java, gcloud's Firestore emulator or functions-framework the session fixture fails, saying what
is missing (devstack checks the prerequisites).

Platforms: `docs` and `vectors` over a tiny corpus written to a temp dir, and `searxng` instances
(FANFUSE_EXTRA_PLATFORMS) pointed at a stub server in this process that answers at once
(`web_ok`), with HTTP 500 (`web_fail`), with a malformed body (`web_bad`), or only when the test
releases a gate (`web_gate`); and the option scenarios' doubles (tests/support/option_scenarios.py:
`web_flaky`, `web_d1`..`web_d3`, `web_slow`). A second start_search process gives its searches a
3 s deadline.
Every function process appends its Firestore writes to one log, so tests count writes per document.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
from google.cloud import firestore

from fanfuse.auth.task_deliveries import SIGNATURE_HEADER
from fanfuse.http.client import KEEPALIVE_EXPIRY
from fanfuse.store.firestore import FirestoreStore
from fanfuse.store.ports import TaskStore
from fanfuse.store.write_log import WriteLog
from fanfuse.tools.devstack.functions_host import FunctionProcess
from fanfuse.tools.devstack.stack import LocalStack, StackAddresses
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.models import TERMINAL_TASK
from tests.support import option_scenarios
from tests.support.fakes import make_task as make_task
from tests.support.signing import task_signature

SHORT_DEADLINE = 3.0
LEASE_SECONDS = 4.5
TERMINAL = {s.value for s in TERMINAL_TASK}

CORPUS = [
    ("q1", "Quantum tunnelling", "Electrons tunnel through a potential barrier in a junction."),
    ("s1", "Superconductivity", "Superconductors carry current without resistance when cold."),
    ("p1", "Plasma physics", "A plasma is an ionised gas of electrons and ions in a field."),
    ("c1", "Semiconductors", "Doped silicon conducts through electrons and holes."),
    ("o1", "Optics", "Lenses refract light and lasers emit coherent light."),
    ("m1", "Magnetism", "Ferromagnets align electron spins into domains."),
    ("t1", "Thermodynamics", "Entropy of an isolated system never decreases."),
    ("a1", "Acoustics", "Sound waves propagate through air as pressure oscillations."),
]

WEB = {
    "web_ok": "delay/0",
    "web_fail": "status/500",
    "web_bad": "malformed",
    "web_gate": "gate/web_gate",
    **option_scenarios.DOUBLES,
}
PLATFORMS = ["docs", "vectors", *WEB]


@dataclass
class Runtime:
    """A running stack and what the tests do with it, whichever cloud it emulates: the public
    API over HTTP, deliveries as its queue makes them, its stored documents, its write log.

    `Cloud` is the GCP stack (emulators, functions); `tests.support.e2e.aws.AwsCloud` the AWS one
    (moto, the Lambda handlers). A test written against `Runtime` runs on either (test_e2e_search.py
    runs on both).
    """

    stub: StubSearxServer
    http: httpx.Client
    write_log: Path
    env: dict[str, str]
    """What every handler process was given (besides the stack's addresses)."""

    def url(self, target: str) -> str:
        raise NotImplementedError

    def short_start_url(self) -> str:
        """start_search of a process whose searches have SHORT_DEADLINE."""
        raise NotImplementedError

    @property
    def tasks_secret(self) -> str:
        raise NotImplementedError

    # -- the public API ------------------------------------------------------------------------

    def start(
        self,
        payload: dict[str, Any],
        *,
        short_deadline: bool = False,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        url = self.short_start_url() if short_deadline else self.url("start_search")
        response = self.http.post(url, json=payload, headers=headers)
        assert response.status_code == 202, response.text
        accepted: dict[str, Any] = response.json()
        assert response.headers["Location"] == accepted["status_url"]
        return accepted

    def status(self, task_id: str, headers: dict[str, str] | None = None) -> httpx.Response:
        return self.http.get(f"{self.url('search_status')}/{task_id}", headers=headers)

    def wait(self, accepted: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        """Poll `status_url` as an app would until the search is terminal."""
        deadline = time.monotonic() + timeout
        while True:
            response = self.http.get(accepted["status_url"])
            assert response.status_code == 200, response.text
            view: dict[str, Any] = response.json()
            if view["status"] in TERMINAL:
                return view
            if time.monotonic() > deadline:
                raise AssertionError(f"not terminal after {timeout} s: {json.dumps(view)[:2000]}")
            time.sleep(0.05)

    def wait_until(self, check: Any, timeout: float = 30.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not reached after {timeout} s")
            time.sleep(0.02)

    def run_of(self, view: dict[str, Any], name: str) -> dict[str, Any]:
        run: dict[str, Any] = next(r for r in view["platform_runs"] if r["name"] == name)
        return run

    # -- as the queue would --------------------------------------------------------------------

    def deliver(
        self,
        target: str,
        body: Any,
        *,
        from_cloud_tasks: bool = True,
        signed: bool = True,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """Deliver a task body to run_platform / aggregate as the stack's queue would, signed
        (unless `signed` is False); the target's answer."""
        raise NotImplementedError

    def signature(self, target: str, content: bytes) -> str:
        """What the stack's queue signs a task body for `target` with."""
        return task_signature(target, content, self.tasks_secret)

    def pause(self, platform: str) -> None:
        """Hold a platform's queue: its tasks wait there (the test delivers them itself)."""
        raise NotImplementedError

    # -- the stored documents ------------------------------------------------------------------

    @property
    def store(self) -> TaskStore:
        raise NotImplementedError

    def task_doc(self, task_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def platform_doc(self, task_id: str, name: str) -> dict[str, Any]:
        raise NotImplementedError

    def stamp(self, path: str) -> object:
        """What changes whenever the document at `path` (`searches/{id}[/platforms/{name}]`)
        is written: equal stamps, no write between."""
        raise NotImplementedError

    def writes(self, task_id: str) -> Counter[str]:
        """Writes per document of one search, by every handler process so far."""
        return WriteLog.read(self.write_log, prefix=f"searches/{task_id}")

    def write_ops(self, task_id: str) -> Counter[tuple[str, str]]:
        """Writes per (document, operation), the document named "task" or by its platform."""
        ops: Counter[tuple[str, str]] = Counter()
        prefix = f"searches/{task_id}"
        for (doc, op), n in WriteLog.read_ops(self.write_log, prefix).items():
            ops[doc.removeprefix(prefix).rpartition("/")[2] or "task", op] += n
        return ops


@dataclass
class Cloud(Runtime):
    """The GCP stack: Firestore and Cloud Tasks emulators, the five functions."""

    stack: LocalStack = field(kw_only=True)
    addresses: StackAddresses = field(kw_only=True)
    short_start: FunctionProcess = field(kw_only=True)
    db: firestore.Client = field(init=False)
    firestore_store: FirestoreStore = field(init=False)

    def __post_init__(self) -> None:
        self.db = self.firestore_client()
        self.firestore_store = FirestoreStore(self.db)

    @property
    def store(self) -> FirestoreStore:
        return self.firestore_store

    def url(self, target: str) -> str:
        return self.addresses.functions[target]

    def short_start_url(self) -> str:
        return self.short_start.url

    @property
    def tasks_secret(self) -> str:
        return self.stack.tasks_secret

    # -- as Cloud Tasks would ------------------------------------------------------------------

    def deliver(
        self,
        target: str,
        body: Any,
        *,
        from_cloud_tasks: bool = True,
        signed: bool = True,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """POST a task body to run_platform / aggregate, signed as the stack's queue signs it
        (unless `signed` is False), with Cloud Tasks' task-name header if asked; `headers` last.
        """
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        sent = {"Content-Type": "application/json"}
        if from_cloud_tasks:
            sent["X-CloudTasks-TaskName"] = f"manual-{time.monotonic_ns()}"
        if signed:
            sent[SIGNATURE_HEADER] = self.signature(target, content)
        return self.http.post(
            self.url(target), content=content, headers={**sent, **(headers or {})}
        )

    def queue(self, platform: str) -> str:
        return self.stack.tasks.queue_path(self.addresses.queues[platform])

    def pause(self, platform: str) -> None:
        """Hold a platform's queue: its tasks wait there (the emulator honours pause)."""
        self.stack.tasks.client().pause_queue(name=self.queue(platform), timeout=5)

    # -- Firestore, read straight (or stalled) ------------------------------------------------

    @contextmanager
    def firestore_stopped(self) -> Iterator[None]:
        """The Firestore emulator stopped for the `with` body, and always continued after it:
        SIGSTOP to its whole process group (gcloud runs the emulator's java as a child). A
        stopped server still accepts connections (the kernel does), so callers wait, as they
        would on a stalled backend."""
        group = self.stack.firestore.process.pid  # the group leader (a session of its own)
        os.killpg(group, signal.SIGSTOP)
        try:
            yield
        finally:
            os.killpg(group, signal.SIGCONT)

    def firestore_client(self) -> firestore.Client:
        """Another client on the emulator (as another function instance would have)."""
        with mock.patch.dict(os.environ, {"FIRESTORE_EMULATOR_HOST": self.addresses.firestore}):
            return firestore.Client(project=self.addresses.project)

    def doc(self, path: str) -> firestore.DocumentSnapshot[firestore.DocumentReference]:
        return self.db.document(path).get()

    def stamp(self, path: str) -> object:
        return self.doc(path).update_time

    def task_doc(self, task_id: str) -> dict[str, Any]:
        snap = self.doc(f"searches/{task_id}")
        data = snap.to_dict()
        assert data is not None, f"no task document {task_id}"
        return data

    def platform_doc(self, task_id: str, name: str) -> dict[str, Any]:
        snap = self.doc(f"searches/{task_id}/platforms/{name}")
        data = snap.to_dict()
        assert data is not None, f"no platform document {task_id}/{name}"
        return data


def concurrently(calls: list[Any]) -> list[Any]:
    """Run the callables at once (threads released together); their results, in order."""
    results: list[Any] = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def run(i: int) -> None:
        barrier.wait()
        results[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def write_corpus(path: Path) -> Path:
    with path.open("w") as out:
        for doc_id, title, text in CORPUS:
            out.write(json.dumps({"id": doc_id, "title": title, "text": text}) + "\n")
    return path


def http_client(**kwargs: Any) -> httpx.Client:
    """A client for the stacks' functions that drops an idle connection before their server does
    (fanfuse.http.client.KEEPALIVE_EXPIRY), as every fanfuse caller of the API does."""
    limits = httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY)
    return httpx.Client(timeout=60, limits=limits, **kwargs)
