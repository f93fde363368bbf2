"""Child processes that always stop, and the small network helpers their components share.

Every child is started in its own session (hence its own process group) because the interesting
processes are grandchildren (gcloud -> bash -> java, gunicorn master -> workers): stopping signals
the whole group, SIGTERM first and SIGKILL after a bounded wait, so nothing survives a stop.
Everything binds to 127.0.0.1 only, and every wait here is bounded.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from fanfuse.tools.devstack import watchdog

LOOPBACK = "127.0.0.1"
DEFAULT_PROJECT = "demo-fanfuse"
"""The project every local component uses unless told otherwise (the emulators accept any)."""
STARTUP_S = 120.0
"""How long a component may take to be ready. A busy 2-core CI machine started the Firestore
emulator in 28 s (3-5 s when quiet); one that exits first fails at once, so a long bound
costs nothing when things work."""
DEFAULT_LOCATION = "us-central1"


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


def default_log_dir() -> Path:
    """A fresh directory for the logs, kept after the stack stops for post-mortems."""
    return Path(tempfile.mkdtemp(prefix="fanfuse-dev-"))


# --------------------------------------------------------------------------------------------
# Processes


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
        self.log_path = log_path or default_log_dir() / f"{name}.log"
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
        return [] if self._popen is None else watchdog.members([self._popen.pid])

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the group, then SIGKILL whatever is left after `timeout` seconds; reap."""
        if self._popen is None:
            return
        left = watchdog.terminate([self._popen.pid], timeout, self._popen.poll)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout=5.0)
        if left:
            raise RuntimeError(f"{self.name}: processes {left} survived SIGKILL")


class Component(ABC):
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
