"""gcloud-tasks-emulator bound to 127.0.0.1, driven by the official Cloud Tasks client.

`python -m fanfuse.tools.devstack cloud-tasks-emulator` (see `__main__.py`) runs
`serve_tasks_emulator`, which binds the emulator to 127.0.0.1: its own CLI listens on every
interface. The Google clients are imported only when an emulator is actually started or talked to.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fanfuse.tools.devstack.processes import (
    DEFAULT_LOCATION,
    DEFAULT_PROJECT,
    LOOPBACK,
    STARTUP_S,
    Component,
    ManagedProcess,
    default_log_dir,
    free_port,
    tcp_open,
    wait_until,
)
from fanfuse.tools.devstack.tasks_dispatch import MAX_CONCURRENT_DISPATCHES

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient


def queue_path(project: str, location: str, queue: str) -> str:
    """Full resource name of a queue, as Cloud Tasks and the emulator key it."""
    return f"projects/{project}/locations/{location}/queues/{queue}"


def tasks_client(host: str) -> CloudTasksClient:
    """The official Cloud Tasks client over plain gRPC to an emulator at `host`."""
    from fanfuse.queue.grpc_channel import tasks_client as make_client

    return make_client(host)


class CloudTasksEmulator(Component):
    """gcloud-tasks-emulator bound to 127.0.0.1, with its queues created through the real client.

    Its own dispatcher delivers one task at a time per queue; the launcher replaces it with
    Cloud Tasks' dispatch (tasks_dispatch.py): up to `max_concurrent_dispatches` tasks in flight
    per queue (infra/queues.tf's), with Cloud Tasks' retry backoff and Retry-After. It still
    ignores rate limits, task-name dedup and OIDC tokens.
    `max_retries` bounds redelivery of a task whose target answers 4xx/5xx (the emulator's own
    default is forever): N means N + 1 attempts.
    `poll_interval` is how often a scheduled task (delayed, or a retry's backoff) is looked at
    again; a new task is dispatched at once.
    """

    def __init__(
        self,
        port: int | None = None,
        queues: Iterable[str] = (),
        project: str = DEFAULT_PROJECT,
        location: str = DEFAULT_LOCATION,
        *,
        max_retries: int = 5,
        poll_interval: float = 0.1,
        max_concurrent_dispatches: int = MAX_CONCURRENT_DISPATCHES,
        log_dir: Path | None = None,
        startup_timeout: float = STARTUP_S,
    ) -> None:
        self.port = port or free_port()
        self.queues = list(queues)
        self.project = project
        self.location = location
        self.max_retries = max_retries
        self.startup_timeout = startup_timeout
        self.startup_seconds: float | None = None
        self._client: CloudTasksClient | None = None
        log_dir = log_dir or default_log_dir()
        self.process = ManagedProcess(
            "cloud-tasks",
            [
                sys.executable,
                "-m",
                "fanfuse.tools.devstack",
                "cloud-tasks-emulator",
                f"--port={self.port}",
                f"--max-retries={max_retries}",
                f"--poll-interval={poll_interval}",
                f"--max-concurrent-dispatches={max_concurrent_dispatches}",
            ],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            log_path=log_dir / "cloud-tasks.log",
        )

    @property
    def host(self) -> str:
        """What FANFUSE_TASKS_EMULATOR_HOST must be set to."""
        return f"{LOOPBACK}:{self.port}"

    def client(self) -> CloudTasksClient:
        if self._client is None:
            self._client = tasks_client(self.host)
        return self._client

    def queue_path(self, queue: str) -> str:
        return queue_path(self.project, self.location, queue)

    def create_queue(self, queue: str) -> str:
        """Create one queue (idempotent on the emulator); return its full name."""
        from google.cloud.tasks_v2 import Queue

        name = self.queue_path(queue)
        parent = f"projects/{self.project}/locations/{self.location}"
        self.client().create_queue(parent=parent, queue=Queue(name=name), timeout=5.0)
        return name

    def _try_create(self, queue: str) -> bool:
        return bool(self.create_queue(queue))

    def list_queues(self) -> list[str]:
        parent = f"projects/{self.project}/locations/{self.location}"
        return sorted(q.name for q in self.client().list_queues(parent=parent, timeout=5.0))

    def launch(self) -> None:
        self._started_at = time.monotonic()
        self.process.start()

    def wait_ready(self) -> None:
        """Ready once it accepts gRPC and every queue exists (the first create proves both)."""
        wait_until(
            lambda: tcp_open(LOOPBACK, self.port),
            self.startup_timeout,
            "Cloud Tasks emulator",
            process=self.process,
        )
        for queue in self.queues:
            wait_until(
                functools.partial(self._try_create, queue),
                self.startup_timeout,
                f"Cloud Tasks queue {queue}",
                process=self.process,
            )
        self.startup_seconds = time.monotonic() - self._started_at

    def stop(self) -> None:
        if self._client is not None:
            transport: Any = self._client.transport  # its close() is untyped
            with contextlib.suppress(Exception):
                transport.close()
            self._client = None
        super().stop()


def serve_tasks_emulator(
    port: int,
    max_retries: int,
    poll_interval: float = 0.1,
    max_concurrent_dispatches: int = MAX_CONCURRENT_DISPATCHES,
) -> None:
    """Run gcloud-tasks-emulator with its gRPC API on 127.0.0.1:port only (blocks).

    Assembled from the package's server parts instead of `create_server`, whose API thread
    binds `[::]` (every interface) and swallows a failed bind in a thread: here the bind happens
    in the main thread and a taken port fails the process at once. Its queue state and gRPC API
    are the package's; its dispatcher is Cloud Tasks' (tasks_dispatch.py), not the package's
    one-at-a-time Processor.
    """
    import logging
    from concurrent import futures

    import gcloud_tasks_emulator.server as emulator_server
    import grpc
    from gcloud_tasks_emulator.cloudtasks_pb2_grpc import add_CloudTasksServicer_to_server
    from gcloud_tasks_emulator.server import Greeter, QueueState

    from fanfuse.tools.devstack.tasks_dispatch import Dispatcher, locked_state

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # Die at once on SIGINT/SIGTERM: a delivery may be blocked in an HTTP call with no timeout
    # and the gRPC server's threads are not daemons, so a graceful shutdown could hang.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    # target host/port: App Engine tasks only; retries: counted by the dispatcher
    state = locked_state(QueueState)("localhost", 80, max_retries)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    add_CloudTasksServicer_to_server(Greeter(state), server)
    server.add_insecure_port(f"{LOOPBACK}:{port}")  # raises if the port is taken
    # Logged before the port accepts connections, so it is in the log once the emulator is ready.
    logging.getLogger("fanfuse.tools.devstack").info(
        "Cloud Tasks emulator on %s:%s (poll every %s s, %s retries); %s in flight per queue",
        LOOPBACK,
        port,
        poll_interval,
        max_retries,
        max_concurrent_dispatches,
    )
    dispatcher = Dispatcher(
        state,
        emulator_server._make_task_request,  # its HTTP delivery, X-CloudTasks-* headers
        limit=max_concurrent_dispatches,
        poll_interval=poll_interval,
        max_retries=max_retries,
    )
    dispatcher.start()
    server.start()
    server.wait_for_termination()
