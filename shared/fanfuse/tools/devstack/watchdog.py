"""A stack's children die with it, on any signal, SIGKILL included: a pipe watchdog.

Why a watchdog and not PR_SET_PDEATHSIG: the death signal only reaches the direct child, and the
processes that matter are grandchildren (gcloud -> java for Firestore, the gunicorn master's
workers), which a dying gcloud does not take down. It also fires when the *thread* that forked
exits, not the process. And no handler in the stack's own process runs on SIGKILL.

So each stack starts one tiny process (`python -m fanfuse.tools.devstack watchdog`) in a session of
its own, reading a pipe whose only write end the stack holds. The stack writes `+PID` for every
child it starts (each child leads a session of its own, see `processes.ManagedProcess`) and
`-PID` once it stopped one itself. When the pipe reaches EOF, which the kernel delivers however
the stack's process ended (a normal stop closes it too), the watchdog stops every session still
listed: SIGTERM, then SIGKILL after a bounded grace. Its own session keeps it out of reach of a
signal sent to the stack's process group (Ctrl-C, `kill -- -PGID`), and it ignores SIGINT,
SIGTERM and SIGHUP: it exits only at EOF, after its work.

The one gap left is a SIGKILL in the microseconds between a child's fork and its `+PID` line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

DEFAULT_GRACE = 5.0
"""Seconds between SIGTERM and SIGKILL: enough for the JVM and gunicorn to exit cleanly."""


def _ids(pid: int) -> tuple[int, int, str] | None:
    """(process group, session, state) of a live pid from /proc, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[2]), int(fields[3]), fields[0]


def members(leaders: Iterable[int]) -> list[int]:
    """Live pids (zombies excluded) whose process group or session is one of `leaders`.

    Session as well as group: a descendant that moved to a group of its own is still ours.
    """
    wanted = set(leaders)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        ids = _ids(int(entry.name))
        if ids is not None and wanted & set(ids[:2]) and ids[2] != "Z":
            found.append(int(entry.name))
    return sorted(found)


def signal_all(leaders: Iterable[int], sig: signal.Signals) -> None:
    """Send `sig` to each leader's group, then to any member left in their sessions."""
    leaders = list(leaders)
    for leader in leaders:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, sig)
    for pid in members(leaders):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def terminate(
    leaders: Iterable[int], grace: float, reap: Callable[[], object] | None = None
) -> list[int]:
    """SIGTERM every member, SIGKILL what is left after `grace` s; the pids still alive after.

    `reap` (e.g. a Popen's poll) is called meanwhile so the caller's own dead child is reaped,
    not left a zombie; the watchdog needs none (the stack's children are not its children).
    """
    leaders = list(leaders)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if not members(leaders):
            return []
        signal_all(leaders, sig)
        deadline = time.monotonic() + wait
        while members(leaders) and time.monotonic() < deadline:
            if reap is not None:
                reap()
            time.sleep(0.05)
    return members(leaders)


def watch(stream: IO[str], grace: float = DEFAULT_GRACE) -> list[int]:
    """The watchdog's body: follow `+PID` / `-PID` lines until EOF, then stop what is listed.

    Returns the pids that survived (logged by the caller; normally none).
    """
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    leaders: set[int] = set()
    for line in stream:
        text = line.strip()
        if text.startswith("+"):
            leaders.add(int(text[1:]))
        elif text.startswith("-"):
            leaders.discard(int(text[1:]))
    return terminate(leaders, grace)


class Watchdog:
    """The stack's side: start the watchdog, tell it each child, close the pipe at the end."""

    def __init__(self, log_path: Path, grace: float = DEFAULT_GRACE) -> None:
        self.log_path = log_path
        self.grace = grace
        self._popen: subprocess.Popen[str] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._popen is None else self._popen.pid

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fanfuse.tools.devstack",
                    "watchdog",
                    f"--grace={self.grace}",
                ],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # out of reach of signals to the stack's group
            )

    def _send(self, line: str) -> None:
        if self._popen is None or self._popen.stdin is None:
            raise RuntimeError("the watchdog was not started")
        try:
            self._popen.stdin.write(line + "\n")
            self._popen.stdin.flush()
        except BrokenPipeError:
            raise RuntimeError(
                f"the stack's watchdog exited (code {self._popen.poll()}); see {self.log_path}"
            ) from None

    def guard(self, pid: int) -> None:
        """Have the watchdog stop session `pid` if this process dies without stopping it."""
        self._send(f"+{pid}")

    def release(self, pid: int) -> None:
        """Session `pid` was stopped here: forget it (its pid may be reused later)."""
        self._send(f"-{pid}")

    def stop(self, timeout: float = 30.0) -> None:
        """Close the pipe (the watchdog stops whatever is still listed) and wait for it."""
        if self._popen is None:
            return
        if self._popen.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self._popen.stdin.close()
        try:
            self._popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._popen.kill()
            self._popen.wait(timeout=5.0)
        self._popen = None
