"""Cloud Tasks' dispatch for gcloud-tasks-emulator: several tasks in flight per queue, and the
retry timing of Cloud Tasks (backoff, Retry-After).

The emulator's own dispatcher (`gcloud_tasks_emulator.server.Processor`) runs one thread per
queue that delivers that queue's tasks one after another, each HTTP call blocking the next, and
puts a failed task straight back in line. Cloud Tasks delivers up to the queue's
`max_concurrent_dispatches` at once (infra/queues.tf) and backs off exponentially between the
attempts of a failed task (the queue's retry_config; for a 429 or 503 it also considers the
answer's Retry-After). With the emulator's dispatcher, a local load test measured the emulator
(one run_platform at a time per platform queue, one aggregate at a time), not fanfuse; and
fanfuse leans on the retry timing: a delivery refused because another worker's lease is live
(lifecycle.claim) says when the lease ends, and must be retried after that, not in 100 ms.

`Dispatcher` replaces that Processor in `serve_tasks_emulator`: the emulator's gRPC API and its
queue state stay (the official client creates, pauses, lists and runs tasks as before), and its
own HTTP request (`_make_task_request`, with the `X-CloudTasks-*` headers) still delivers each
task. `LockedQueueState` is the emulator's state with one lock around its task lists, which the
API threads and the dispatch threads now change at the same time.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib import error

from fanfuse.support.retry_after import parse_retry_after
from fanfuse.tools.devstack.tasks_retry import retry_delay

log = logging.getLogger(__name__)

MAX_CONCURRENT_DISPATCHES = 20
"""Tasks in flight per queue: the `max_concurrent_dispatches` infra/queues.tf gives the
aggregate queue and the default deployment's platform queue (variables.tf: docs), which
tests/infra/test_terraform.py checks. Every local queue gets it: the stub platforms of the local
stack have no provider quota of their own."""


def _now() -> datetime:
    return datetime.now(UTC)


def _due(task: Any, now: datetime) -> bool:
    """A task is due once its schedule time (a delayed task's, or a retry's backoff) is past."""
    when = task.schedule_time
    return not when or when <= now


def locked_state(state_class: type[Any]) -> type[Any]:
    """The emulator's QueueState with one lock around every change to its task lists (the API
    threads append and purge while the dispatch threads take tasks out and put failed ones back),
    and a condition the dispatcher waits on, notified when a task arrives or a queue resumes."""

    class LockedQueueState(state_class):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.changed = threading.Condition()

        def create_task(self, queue: str, task: Any) -> Any:
            with self.changed:
                created = super().create_task(queue, task)
                self.changed.notify_all()
            return created

        def resume_queue(self, queue_name: str) -> Any:
            with self.changed:
                resumed = super().resume_queue(queue_name)
                self.changed.notify_all()
            return resumed

        def purge_queue(self, queue_name: str) -> Any:
            with self.changed:
                return super().purge_queue(queue_name)

        def delete_queue(self, name: str) -> Any:
            with self.changed:
                return super().delete_queue(name)

        def list_tasks(self, queue_name: str) -> Any:
            with self.changed:
                return list(super().list_tasks(queue_name))

        def submit_task(self, task_name: str, force_run: bool = False) -> Any:
            """RunTask (the API's "run it now"), which fanfuse never calls: the emulator's own
            would race the dispatch threads for the task, so the API refuses it cleanly."""
            from google.api_core.exceptions import MethodNotImplemented

            refusal = "RunTask: not with the local concurrent dispatcher"
            raise MethodNotImplemented(refusal)  # type: ignore[no-untyped-call]

    return LockedQueueState


class Dispatcher(threading.Thread):
    """Delivers every due task of every running queue, at most `limit` at a time per queue."""

    def __init__(
        self,
        state: Any,
        make_request: Any,
        *,
        limit: int = MAX_CONCURRENT_DISPATCHES,
        poll_interval: float = 0.1,
        max_retries: int = 5,
    ) -> None:
        """`state`: a `locked_state` QueueState; `make_request(queue, task, host, port)`: the
        emulator's HTTP delivery (`_make_task_request`); `max_retries`: how often a failed task
        is delivered again (N: N + 1 attempts; negative: forever, the emulator's default);
        `poll_interval`: how often a scheduled task is looked at again (a new task, a resumed
        queue and a freed slot wake the dispatcher at once)."""
        super().__init__(name="tasks-dispatcher", daemon=True)
        self.state = state
        self.make_request = make_request
        self.limit = limit
        self.poll_interval = poll_interval
        self.max_retries = max_retries
        self.in_flight: Counter[str] = Counter()
        self.stopping = threading.Event()

    def run(self) -> None:
        from google.cloud.tasks_v2 import Queue

        while not self.stopping.is_set():
            with self.state.changed:
                taken = self._take(Queue.State.RUNNING)
                if not taken:
                    self.state.changed.wait(self.poll_interval)
            for queue, task in taken:  # at most `limit` per queue: one thread each
                threading.Thread(target=self._deliver, args=(queue, task), daemon=True).start()

    def _take(self, running: Any) -> list[tuple[str, Any]]:
        """Take the due tasks of each running queue off its list, up to its free slots, in the
        order they were created (the caller holds the state's lock)."""
        now = _now()
        taken: list[tuple[str, Any]] = []
        for queue in self.state.queue_names():
            if self.state.queue(queue).state != running:
                continue
            free = self.limit - self.in_flight[queue]
            tasks = self.state._queue_tasks[queue]
            due = [t for t in tasks if _due(t, now)][: max(0, free)]
            if not due:
                continue
            out = {id(t) for t in due}  # by identity: a Task compares by value
            tasks[:] = [t for t in tasks if id(t) not in out]  # in place: the state's list
            self.in_flight[queue] += len(due)
            taken.extend((queue, t) for t in due)
        return taken

    def _deliver(self, queue: str, task: Any) -> None:
        from google.cloud.tasks_v2 import Attempt

        task.dispatch_count += 1
        dispatched = _now()
        retry_after: str | None = None
        try:
            response = self.make_request(
                queue, task, self.state._target_host, self.state._target_port
            )
            status = int(response.status)
            response.close()
        except error.HTTPError as exc:
            status, retry_after = exc.code, exc.headers.get("Retry-After")
            exc.close()
            log.info("task %s answered %s", task.name, status)
        except (ConnectionError, error.URLError) as exc:  # nothing listening, reset...
            status = 500
            log.error("delivering task %s failed: %s", task.name, exc)
        except Exception:
            status = 500
            log.exception("delivering task %s failed", task.name)
        attempt = Attempt(
            schedule_time=dispatched,
            dispatch_time=dispatched,
            response_time=_now(),
            response_status={"code": status},
        )
        task.first_attempt = task.first_attempt or attempt
        task.last_attempt = attempt
        with self.state.changed:
            self.in_flight[queue] -= 1
            if 400 <= status < 600 and queue in self.state._queue_tasks:
                if self.max_retries < 0 or task.dispatch_count <= self.max_retries:
                    now = _now()
                    wait = retry_delay(task.dispatch_count, parse_retry_after(retry_after, now))
                    task.schedule_time = now + timedelta(seconds=wait)
                    self.state._queue_tasks[queue].append(task)
                else:
                    attempts = task.dispatch_count
                    log.info("Giving up failed task %s (%s attempts)", task.name, attempts)
            self.state.changed.notify_all()

    def stop(self) -> None:
        self.stopping.set()
        with self.state.changed:
            self.state.changed.notify_all()
