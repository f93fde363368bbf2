"""How a local stack lives and dies, whatever its components: the GCP one and the AWS one.

A stack's `start` launches its components under a watchdog (each child's pid is guarded: if
this process dies with no chance to stop anything, SIGKILL included, the watchdog stops them),
turns SIGTERM/SIGHUP into SystemExit while it runs (so a with block unwinds), registers its stop
at interpreter exit, and stops everything if booting fails. `stop` stops the components in the
order the stack gives, releases each from the watchdog, and is safe to call twice.
"""

from __future__ import annotations

import atexit
import signal
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Generic, TypeVar

from fanfuse.tools.devstack.processes import Component, ManagedProcess
from fanfuse.tools.devstack.watchdog import Watchdog

A = TypeVar("A")


class StackLifetime(ABC, Generic[A]):
    """Start/stop plumbing of a stack whose `boot` returns its addresses (`A`)."""

    handle_signals: bool = True

    def __init__(self, log_dir: Path, handle_signals: bool = True) -> None:
        self.handle_signals = handle_signals
        self.watchdog = Watchdog(log_dir / "watchdog.log")
        self._previous_handlers: dict[int, Any] = {}
        self._stopping = threading.Lock()
        self._started = False

    @abstractmethod
    def components(self) -> Sequence[Component]:
        """Every component, in start order."""

    @abstractmethod
    def boot(self) -> A:
        """Launch (with `launch`) and wait for the components; the stack's addresses."""

    def stop_order(self) -> Sequence[Component]:
        """The order components are stopped in: by default, the reverse of the start order."""
        return list(reversed(self.components()))

    def processes(self) -> list[ManagedProcess]:
        return [c.process for c in self.components()]

    def startup_seconds(self) -> dict[str, float | None]:
        return {c.process.name: c.startup_seconds for c in self.components()}

    def launch(self, component: Component) -> None:
        """Launch one component without waiting, its pid guarded by the watchdog."""
        component.launch()
        self.watchdog.guard(component.process.pid)

    def start(self) -> A:
        self._install_signal_handlers()
        atexit.register(self.stop)
        self._started = True
        try:
            self.watchdog.start()
            return self.boot()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every component (in `stop_order`); safe to call twice."""
        if not self._stopping.acquire(blocking=False):
            return
        try:
            errors: list[str] = []
            for component in self.stop_order():
                try:
                    component.stop()
                    if self.watchdog.pid is not None and component.process.returncode is not None:
                        self.watchdog.release(component.process.pid)
                except Exception as exc:
                    errors.append(f"{component.process.name}: {exc}")
            # Whatever could not be stopped above, the watchdog stops at the pipe's EOF.
            self.watchdog.stop()
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

    def __enter__(self) -> A:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
