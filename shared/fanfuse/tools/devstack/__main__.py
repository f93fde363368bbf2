"""`python -m fanfuse.tools.devstack cloud-tasks-emulator --port N`: what CloudTasksEmulator runs;
`python -m fanfuse.tools.devstack watchdog`: what a LocalStack's `watchdog.Watchdog` runs.

gcloud-tasks-emulator's own CLI listens on every interface; this launcher serves it on 127.0.0.1
only (see `cloud_tasks.serve_tasks_emulator`). It runs as a child process, not a thread, so the
stack stops it like any other component, with its whole process group.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from fanfuse.tools.devstack import watchdog
from fanfuse.tools.devstack.tasks_dispatch import MAX_CONCURRENT_DISPATCHES
from fanfuse.tools.devstack.tasks_emulator import serve_tasks_emulator


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m fanfuse.tools.devstack")
    sub = parser.add_subparsers(dest="command", required=True)
    tasks = sub.add_parser("cloud-tasks-emulator", help="gcloud-tasks-emulator on 127.0.0.1")
    tasks.add_argument("--port", type=int, required=True)
    tasks.add_argument("--max-retries", type=int, default=5)
    tasks.add_argument("--poll-interval", type=float, default=0.1)
    tasks.add_argument("--max-concurrent-dispatches", type=int, default=MAX_CONCURRENT_DISPATCHES)
    guard = sub.add_parser("watchdog", help="stop the sessions listed on stdin at its EOF")
    guard.add_argument("--grace", type=float, default=watchdog.DEFAULT_GRACE)
    args = parser.parse_args(argv)
    if args.command == "watchdog":
        left = watchdog.watch(sys.stdin, args.grace)
        if left:
            print(f"watchdog: processes {left} survived SIGKILL", flush=True)
        return 1 if left else 0
    serve_tasks_emulator(
        args.port, args.max_retries, args.poll_interval, args.max_concurrent_dispatches
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
