"""The local cloud stack: Firestore emulator, Cloud Tasks emulator and the functions, on 127.0.0.1.

Used by `fanfuse dev` and by the pytest session fixtures, so both run the very same processes.
Every child is started in its own session (hence its own process group) because the interesting
processes are grandchildren (gcloud -> bash -> java, gunicorn master -> workers): stopping signals
the whole group, SIGTERM first and SIGKILL after a bounded wait, so nothing survives a stop.

Only the standard library is imported at module level; the Google clients are imported when a
Cloud Tasks emulator is actually started. `python -m fanfuse.devstack cloud-tasks-emulator` is the
launcher that binds gcloud-tasks-emulator to 127.0.0.1 (its own CLI listens on every interface).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient

__all__ = [
    "AGGREGATE_QUEUE",
    "DEFAULT_LOCATION",
    "DEFAULT_PROJECT",
    "FUNCTION_TARGETS",
    "CloudTasksEmulator",
    "FirestoreEmulator",
    "FunctionProcess",
    "LocalStack",
    "ManagedProcess",
    "StackAddresses",
    "free_port",
    "queue_id",
    "queue_path",
    "tasks_client",
    "wait_until",
]

LOOPBACK = "127.0.0.1"
DEFAULT_PROJECT = "demo-fanfuse"
DEFAULT_LOCATION = "us-central1"
FUNCTION_TARGETS: tuple[str, ...] = (
    "start_search",
    "search_status",
    "cancel_search",
    "run_platform",
    "aggregate",
)
AGGREGATE_QUEUE = "aggregate"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_FUNCTIONS_SOURCE = REPO_ROOT / "functions" / "main.py"


# --------------------------------------------------------------------------------------------
# Small helpers


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (the OS picks it, so no guessing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    *,
    interval: float = 0.1,
    process: ManagedProcess | None = None,
) -> None:
    """Poll `check` until it is true, at most `timeout` seconds.

    Exceptions from `check` count as "not yet" (a port that refuses connections is the normal
    state during start-up). When `process` is given and exits meanwhile, fail at once with the
    tail of its log instead of waiting out the timeout.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            if check():
                return
        except Exception as exc:
            last_error = exc
        if process is not None and not process.running():
            raise RuntimeError(
                f"{what}: {process.name} exited with code {process.returncode} before it was "
                f"ready. Last lines of {process.log_path}:\n{process.log_tail()}"
            )
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            tail = f"\nLast lines of {process.log_path}:\n{process.log_tail()}" if process else ""
            raise TimeoutError(f"{what} not ready after {timeout:.0f} s{detail}{tail}")
        time.sleep(interval)


def tcp_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_request(
    method: str,
    url: str,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[int, bytes]:
    """(status, body) of one HTTP request; HTTP errors are returned, not raised."""
    req = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), bytes(resp.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read())


def queue_id(platform: str) -> str:
    """Queue id of a platform (or of "aggregate"): `fanfuse-{platform with _ as -}`."""
    return f"fanfuse-{platform.replace('_', '-')}"


def queue_path(project: str, location: str, queue: str) -> str:
    """Full resource name of a queue, as Cloud Tasks and the emulator key it."""
    return f"projects/{project}/locations/{location}/queues/{queue}"


def tasks_client(host: str) -> CloudTasksClient:
    """The official Cloud Tasks client over plain gRPC to an emulator at `host`."""
    from fanfuse.queue.grpc_channel import tasks_client as make_client

    return make_client(host)


def _default_log_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="fanfuse-dev-"))


# --------------------------------------------------------------------------------------------
# Processes


def _proc_ids(pid: int) -> tuple[int, int, str] | None:
    """(process group, session, state) of a live pid from /proc, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[2]), int(fields[3]), fields[0]


class ManagedProcess:
    """One child process in its own session, with its output in a log file.

    The log file (not a pipe) means a chatty child can never block on a full pipe buffer, and
    the file survives the process for post-mortems.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.log_path = log_path or _default_log_dir() / f"{name}.log"
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        if self._popen is None:
            raise RuntimeError(f"{self.name} was not started")
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return None if self._popen is None else self._popen.poll()

    def start(self) -> None:
        if self._popen is not None:
            raise RuntimeError(f"{self.name} already started")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def survivors(self) -> list[int]:
        """Pids still alive (zombies excluded) in this child's process group or session."""
        if self._popen is None:
            return []
        group = self._popen.pid
        alive = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            ids = _proc_ids(int(entry.name))
            if ids is not None and group in ids[:2] and ids[2] != "Z":
                alive.append(int(entry.name))
        return sorted(alive)

    def _signal_all(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)
        # A descendant that moved to another group of the same session is still ours.
        for pid in self.survivors():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the group, then SIGKILL whatever is left after `timeout` seconds; reap."""
        if self._popen is None:
            return
        if self.survivors():
            self._signal_all(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self.survivors() and time.monotonic() < deadline:
                self._reap()
                time.sleep(0.05)
            if self.survivors():
                self._signal_all(signal.SIGKILL)
                deadline = time.monotonic() + 5.0
                while self.survivors() and time.monotonic() < deadline:
                    self._reap()
                    time.sleep(0.05)
        self._reap()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout=5.0)
        left = self.survivors()
        if left:
            raise RuntimeError(f"{self.name}: processes {left} survived SIGKILL")

    def _reap(self) -> None:
        if self._popen is not None:
            self._popen.poll()


class _Component(ABC):
    """Start/stop plumbing shared by the three kinds of component; usable as a context manager.

    `launch()` spawns without waiting and `wait_ready()` blocks, so a stack can boot all its
    components at once and then wait for each.
    """

    process: ManagedProcess
    startup_seconds: float | None = None
    _started_at: float = 0.0

    @abstractmethod
    def launch(self) -> None: ...

    @abstractmethod
    def wait_ready(self) -> None: ...

    def start(self) -> Self:
        """Launch, wait until ready (stopping again if that fails), return self."""
        self.launch()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.process.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------
# Firestore


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


class FirestoreEmulator(_Component):
    """The official Firestore emulator (`gcloud emulators firestore start`) on 127.0.0.1."""

    def __init__(
        self,
        project: str = DEFAULT_PROJECT,
        port: int | None = None,
        *,
        log_dir: Path | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.project = project
        self.port = port or free_port()
        self.startup_timeout = startup_timeout
        self.startup_seconds: float | None = None
        log_dir = log_dir or _default_log_dir()
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

    def wait_ready(self) -> None:
        """Ready when GET / answers 200 (about 4 s of JVM start-up on 2 cores)."""
        wait_until(self._ready, self.startup_timeout, "Firestore emulator", process=self.process)
        self.startup_seconds = time.monotonic() - self._started_at

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


# --------------------------------------------------------------------------------------------
# Cloud Tasks


class CloudTasksEmulator(_Component):
    """gcloud-tasks-emulator bound to 127.0.0.1, with its queues created through the real client.

    It dispatches one task at a time per queue, and ignores retry backoff, rate limits, task-name
    dedup and OIDC tokens. `max_retries` bounds redelivery of a task whose target answers 4xx/5xx
    (the emulator's own default is forever, in a tight loop): N means N + 1 attempts.
    `poll_interval` is how often each queue looks for due tasks (the emulator's 0.1 s adds up to
    that much latency per hop; lower it for latency measurements).
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
        log_dir: Path | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        self.port = port or free_port()
        self.queues = list(queues)
        self.project = project
        self.location = location
        self.max_retries = max_retries
        self.startup_timeout = startup_timeout
        self.startup_seconds: float | None = None
        self._client: CloudTasksClient | None = None
        log_dir = log_dir or _default_log_dir()
        self.process = ManagedProcess(
            "cloud-tasks",
            [
                sys.executable,
                "-m",
                "fanfuse.devstack",
                "cloud-tasks-emulator",
                f"--port={self.port}",
                f"--max-retries={max_retries}",
                f"--poll-interval={poll_interval}",
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


def serve_tasks_emulator(port: int, max_retries: int, poll_interval: float = 0.1) -> None:
    """Run gcloud-tasks-emulator with its gRPC API on 127.0.0.1:port only (blocks).

    Assembled from the package's server parts instead of `create_server`, whose API thread
    binds `[::]` (every interface) and swallows a failed bind in a thread: here the bind happens
    in the main thread and a taken port fails the process at once.
    """
    import logging
    from concurrent import futures

    import gcloud_tasks_emulator.server as emulator_server
    import grpc
    from gcloud_tasks_emulator.cloudtasks_pb2_grpc import add_CloudTasksServicer_to_server
    from gcloud_tasks_emulator.server import Greeter, Processor, QueueState

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # Die at once on SIGINT/SIGTERM: the dispatcher threads are not daemons and one may be
    # blocked in an HTTP call with no timeout, so a graceful shutdown could hang.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    emulator_server._LOOP_SLEEP_TIME = poll_interval  # read by the queue loops on each turn
    state = QueueState("localhost", 80, max_retries)  # target host/port: App Engine tasks only
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    add_CloudTasksServicer_to_server(Greeter(state), server)
    server.add_insecure_port(f"{LOOPBACK}:{port}")  # raises if the port is taken
    # Logged before the port accepts connections, so it is in the log once the emulator is ready.
    logging.getLogger("fanfuse.devstack").info(
        "Cloud Tasks emulator on %s:%s (poll every %s s, %s retries)",
        LOOPBACK,
        port,
        poll_interval,
        max_retries,
    )
    processor = Processor(state)
    processor.daemon = True
    processor.start()
    server.start()
    server.wait_for_termination()


# --------------------------------------------------------------------------------------------
# Functions


def _functions_framework() -> str:
    """The functions-framework script of this interpreter's environment (PATH as a fallback)."""
    beside = Path(sys.executable).parent / "functions-framework"
    if beside.exists():
        return str(beside)
    found = shutil.which("functions-framework")
    if found is None:
        raise RuntimeError("functions-framework not found: pip install 'fanfuse[cloud]'")
    return found


class FunctionProcess(_Component):
    """One function target under functions-framework (gunicorn) on 127.0.0.1."""

    def __init__(
        self,
        target: str,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        *,
        source: Path = DEFAULT_FUNCTIONS_SOURCE,
        log_dir: Path | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.target = target
        self.port = port or free_port()
        self.source = Path(source)
        self.extra_env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.startup_seconds: float | None = None
        log_dir = log_dir or _default_log_dir()
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


# --------------------------------------------------------------------------------------------
# The whole stack


@dataclass(frozen=True)
class StackAddresses:
    """Where the running stack lives; `env()` is what each function process is given."""

    project: str
    location: str
    firestore: str
    tasks: str
    functions: dict[str, str]
    queues: dict[str, str] = field(default_factory=dict)
    log_dir: Path | None = None

    def env(self) -> dict[str, str]:
        return {
            "GOOGLE_CLOUD_PROJECT": self.project,
            "FANFUSE_PROJECT": self.project,
            "FANFUSE_REGION": self.location,
            "FIRESTORE_EMULATOR_HOST": self.firestore,
            "FANFUSE_TASKS_EMULATOR_HOST": self.tasks,
            "FANFUSE_FUNCTION_URLS": json.dumps(self.functions, sort_keys=True),
        }

    def describe(self) -> list[tuple[str, str]]:
        lines = [
            ("project", self.project),
            ("firestore", self.firestore),
            ("cloud_tasks", self.tasks),
        ]
        lines += [(target, self.functions[target]) for target in self.functions]
        if self.log_dir is not None:
            lines.append(("logs", str(self.log_dir)))
        return lines


class LocalStack:
    """Firestore + Cloud Tasks (one queue per platform, plus aggregate) + the five functions.

    `with LocalStack(["docs", "vectors"]) as addresses:` starts everything, the emulators in
    parallel and then the functions in parallel, and stops everything on exit, on an exception,
    on Ctrl-C and on SIGTERM/SIGHUP (turned into SystemExit while the stack runs, so the with
    block unwinds), and at interpreter exit as a last resort.
    """

    def __init__(
        self,
        platforms: Iterable[str],
        *,
        project: str = DEFAULT_PROJECT,
        location: str = DEFAULT_LOCATION,
        source: Path = DEFAULT_FUNCTIONS_SOURCE,
        targets: Sequence[str] = FUNCTION_TARGETS,
        firestore_port: int | None = None,
        tasks_port: int | None = None,
        function_ports: Mapping[str, int] | None = None,
        extra_env: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        tasks_max_retries: int = 5,
        tasks_poll_interval: float = 0.1,
        handle_signals: bool = True,
    ) -> None:
        self.platforms = list(dict.fromkeys(platforms))
        self.project = project
        self.location = location
        self.log_dir = log_dir or _default_log_dir()
        self.handle_signals = handle_signals
        queue_names = {p: queue_id(p) for p in [*self.platforms, AGGREGATE_QUEUE]}
        self.firestore = FirestoreEmulator(project, firestore_port, log_dir=self.log_dir)
        self.tasks = CloudTasksEmulator(
            tasks_port,
            queue_names.values(),
            project,
            location,
            max_retries=tasks_max_retries,
            poll_interval=tasks_poll_interval,
            log_dir=self.log_dir,
        )
        ports = dict(function_ports or {})
        urls = {t: f"http://{LOOPBACK}:{ports.setdefault(t, free_port())}" for t in targets}
        self.addresses = StackAddresses(
            project=project,
            location=location,
            firestore=self.firestore.host,
            tasks=self.tasks.host,
            functions=urls,
            queues=queue_names,
            log_dir=self.log_dir,
        )
        env = {**self.addresses.env(), **dict(extra_env or {})}
        self.functions = [
            FunctionProcess(t, ports[t], env, source=source, log_dir=self.log_dir) for t in targets
        ]
        self._previous_handlers: dict[int, Any] = {}
        self._stopping = threading.Lock()
        self._started = False

    def components(self) -> list[FirestoreEmulator | CloudTasksEmulator | FunctionProcess]:
        return [self.firestore, self.tasks, *self.functions]

    def processes(self) -> list[ManagedProcess]:
        return [c.process for c in self.components()]

    def describe(self) -> list[tuple[str, str]]:
        """One (component, address) pair per line of `fanfuse dev`'s banner."""
        return self.addresses.describe()

    def startup_seconds(self) -> dict[str, float | None]:
        return {c.process.name: c.startup_seconds for c in self.components()}

    def start(self) -> StackAddresses:
        self._install_signal_handlers()
        atexit.register(self.stop)
        self._started = True
        try:
            # Firestore needs ~4 s of JVM start-up: overlap it with everything else.
            self.firestore.launch()
            self.tasks.launch()
            for function in self.functions:
                function.launch()
            self.tasks.wait_ready()
            self.firestore.wait_ready()
            for function in self.functions:
                function.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self.addresses

    def stop(self) -> None:
        """Stop every component (functions first, then the emulators); safe to call twice."""
        if not self._stopping.acquire(blocking=False):
            return
        try:
            errors: list[str] = []
            for component in [*self.functions, self.tasks, self.firestore]:
                try:
                    component.stop()
                except Exception as exc:
                    errors.append(f"{component.process.name}: {exc}")
            atexit.unregister(self.stop)
            self._restore_signal_handlers()
            if errors:
                raise RuntimeError("; ".join(errors))
        finally:
            self._stopping.release()

    def _install_signal_handlers(self) -> None:
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._previous_handlers[sig] = signal.signal(sig, self._on_signal)

    def _restore_signal_handlers(self) -> None:
        for sig, handler in self._previous_handlers.items():
            signal.signal(sig, handler)
        self._previous_handlers.clear()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Unwind the main thread (the with block stops the stack); a second signal while the
        # stop is already running is ignored so the stop can finish.
        if self._stopping.locked():
            return
        raise SystemExit(128 + signum)

    def __enter__(self) -> StackAddresses:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------
# Launcher entry point (used by CloudTasksEmulator)


def _main(argv: Sequence[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m fanfuse.devstack")
    sub = parser.add_subparsers(dest="command", required=True)
    tasks = sub.add_parser("cloud-tasks-emulator", help="gcloud-tasks-emulator on 127.0.0.1")
    tasks.add_argument("--port", type=int, required=True)
    tasks.add_argument("--max-retries", type=int, default=5)
    tasks.add_argument("--poll-interval", type=float, default=0.1)
    args = parser.parse_args(argv)
    serve_tasks_emulator(args.port, args.max_retries, args.poll_interval)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
