"""`fanfuse dev --cloud aws`: moto and the Lambda handlers on 127.0.0.1, a search through them,
and nothing left behind after SIGTERM or SIGKILL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from fanfuse.auth import keys
from fanfuse.queue.port import queue_id
from fanfuse.tools.devstack.processes import tcp_open, wait_until
from tests.integration.test_devstack import (
    _banner,
    _read_line,
    cli_search,
    processes_in_groups,
    start_dev,
)


def dev_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FANFUSE_", "AWS_"))}
    return env | {
        "FANFUSE_QUEUE_PREFIX": "zz",
        "FANFUSE_CACHE_DIR": os.environ["FANFUSE_CACHE_DIR"],
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "200",
    }


def port_of(url: str) -> int:
    return int(url.strip().rstrip("/").split(":")[2].split("/")[0])


def test_fanfuse_dev_cloud_aws_serves_a_search_and_stops_cleanly(tmp_path: Path) -> None:
    env = dev_env()
    dev = start_dev(["--cloud", "aws", "-p", "docs"], env, tmp_path / "dev.stderr")
    ports: list[int] = []
    try:
        banner = _banner(dev, timeout=200, stderr_path=tmp_path / "dev.stderr")
        assert next(iter(banner)) == "moto"  # the first line names the moto endpoint
        ports = [port_of(banner["moto"]), port_of(banner["start_search"])]
        assert banner["sqs:docs"].strip().endswith("/" + queue_id("zz", "docs"))
        assert banner["sqs:aggregate"].strip().endswith("/zz-aggregate")
        assert keys.parse_key(banner["api_key"]) is not None
        view = cli_search(banner["start_search"].strip(), "waves", env, banner["api_key"].strip())
        assert view["status"] == "completed", view
        assert {r["platform"] for r in view["results"]} == {"docs"}

        dev.send_signal(signal.SIGTERM)
        assert dev.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait(timeout=10)
    assert ports and not any(tcp_open("127.0.0.1", port) for port in ports)


STACK_SCRIPT = """
import json, sys, time
from pathlib import Path
from fanfuse.tools.devstack.aws_stack import AwsStack
stack = AwsStack(["docs"], log_dir=Path(sys.argv[1]))
with stack:
    ports = [stack.moto.port, stack.handlers.port]
    report = {"groups": [p.pid for p in stack.processes()], "watchdog": stack.watchdog.pid}
    print(json.dumps({**report, "ports": ports}), flush=True)
    while True:
        time.sleep(0.1)
"""


def test_an_aws_stack_killed_with_sigkill_leaves_nothing(tmp_path: Path) -> None:
    runner = subprocess.Popen(
        [sys.executable, "-c", STACK_SCRIPT, str(tmp_path)],
        env=dev_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    groups: set[int] = set()
    try:
        report = json.loads(_read_line(runner, timeout=90))
        groups, ports = set(report["groups"]), report["ports"]
        assert len(groups) == 2 and processes_in_groups(groups)
        assert all(tcp_open("127.0.0.1", port) for port in ports)
        os.killpg(runner.pid, signal.SIGKILL)  # no handler of the stack runs
        runner.wait(timeout=10)
        wait_until(lambda: not processes_in_groups(groups), 30, "children gone after SIGKILL")
        assert not any(tcp_open("127.0.0.1", port) for port in ports)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(timeout=10)
        for pid in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
