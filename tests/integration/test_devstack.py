"""The local stack's process management: every component starts, answers, stops, leaves nothing.

These tests start the real Firestore emulator (gcloud + Java), the Cloud Tasks emulator and
functions-framework processes. A machine without Java or the emulator fails them: never a skip.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from google.cloud import tasks_v2

from fanfuse.auth import keys
from fanfuse.platforms import Registry
from fanfuse.queue.cloud_tasks import CloudTasksQueue
from fanfuse.queue.port import PlatformMessage
from fanfuse.settings import Settings
from fanfuse.store.firestore import FirestoreStore
from fanfuse.tools.devstack.firestore_emulator import FirestoreEmulator
from fanfuse.tools.devstack.functions_host import FunctionProcess
from fanfuse.tools.devstack.processes import (
    DEFAULT_LOCATION,
    DEFAULT_PROJECT,
    ManagedProcess,
    free_port,
    http_request,
    tcp_open,
    wait_until,
)
from fanfuse.tools.devstack.stack import (
    LocalStack,
    browser_app_env,
    browser_app_problem,
    queue_id,
)
from fanfuse.tools.devstack.tasks_emulator import CloudTasksEmulator, queue_path, tasks_client
from tests.infra.test_firestore_rules import token

FIXTURE_FUNCTIONS = Path(__file__).resolve().parents[1] / "fixtures" / "stack_functions.py"


# ---------------------------------------------------------------------------------------------
# Helpers: what is listening where, and which processes are left


def listening_addresses(port: int) -> set[str]:
    """Addresses with a TCP socket in LISTEN state on `port`, read from /proc/net/tcp{,6}."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].split(":")
            if fields[3] != "0A" or int(port_hex, 16) != port:
                continue
            if len(address) == 8:
                found.add(str(ipaddress.IPv4Address(bytes.fromhex(address)[::-1])))
            else:
                raw = b"".join(bytes.fromhex(address[i : i + 8])[::-1] for i in range(0, 32, 8))
                ip6 = ipaddress.IPv6Address(raw)
                found.add(str(ip6.ipv4_mapped or ip6))
    return found


def processes_in_groups(groups: set[int]) -> list[str]:
    """Live (non-zombie) processes whose process group or session is one of `groups`."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and {int(fields[2]), int(fields[3])} & groups:
            alive.append(f"{entry.name}: {cmdline}")
    return alive


def processes_mentioning(needles: list[str]) -> list[str]:
    """Any live process on the machine whose command line contains one of `needles`."""
    hits = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(n in cmdline for n in needles):
            hits.append(f"{entry.name}: {cmdline}")
    return hits


Received = list[tuple[str, dict[str, str], bytes]]


class RecordingServer(ThreadingHTTPServer):
    """Keeps what its handler records."""

    received: Received


class Recorder(BaseHTTPRequestHandler):
    """Records each POST (path, lower-cased headers, body) into the server's `received` list."""

    server: RecordingServer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.received.append((self.path, headers, body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, Received]]:
    server = RecordingServer(("127.0.0.1", 0), Recorder)
    server.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# ---------------------------------------------------------------------------------------------
# Helpers of devstack itself


def test_free_port_is_bindable_and_wait_until_is_bounded() -> None:
    port = free_port()
    assert not tcp_open("127.0.0.1", port)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="nothing not ready"):
        wait_until(lambda: False, 0.3, "nothing")
    assert time.monotonic() - started < 2.0


def test_wait_until_fails_fast_when_the_process_dies(tmp_path: Path) -> None:
    proc = ManagedProcess(
        "crasher", ["sh", "-c", "echo boom-line; exit 3"], log_path=tmp_path / "c.log"
    )
    proc.start()
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"(?s)exited with code 3.*boom-line"):
        wait_until(lambda: False, 30, "crasher", process=proc)
    assert time.monotonic() - started < 5.0
    proc.stop()


def test_stop_kills_the_whole_group_even_when_sigterm_is_ignored(tmp_path: Path) -> None:
    # A parent and a grandchild that both ignore SIGTERM: only SIGKILL of the group ends them.
    script = "trap '' TERM; sh -c \"trap '' TERM; sleep 300\" & sleep 300"
    proc = ManagedProcess("stubborn", ["sh", "-c", script], log_path=tmp_path / "s.log")
    proc.start()
    wait_until(lambda: len(proc.survivors()) >= 3, 10, "stubborn children")
    started = time.monotonic()
    proc.stop(timeout=1.0)
    assert time.monotonic() - started < 8.0
    assert proc.survivors() == []
    assert processes_in_groups({proc.pid}) == []


# ---------------------------------------------------------------------------------------------
# Firestore


def test_firestore_emulator_start_reset_rules_stop(tmp_path: Path) -> None:
    emulator = FirestoreEmulator("demo-devstack", log_dir=tmp_path)
    with emulator:
        assert emulator.host == f"127.0.0.1:{emulator.port}"
        assert emulator.startup_seconds is not None
        print(f"firestore emulator ready in {emulator.startup_seconds:.1f} s")
        assert listening_addresses(emulator.port) == {"127.0.0.1"}

        doc = f"{emulator.url}/v1/projects/demo-devstack/databases/(default)/documents/searches/t1"
        admin = {"Authorization": "Bearer owner", "Content-Type": "application/json"}
        body = json.dumps({"fields": {"owner": {"stringValue": "alice"}}}).encode()
        assert http_request("PATCH", doc, body, admin)[0] == 200
        assert http_request("GET", doc, headers=admin)[0] == 200
        emulator.reset()
        assert http_request("GET", doc, headers=admin)[0] == 404

        emulator.load_rules(
            "rules_version = '2';\nservice cloud.firestore {\n"
            "  match /databases/{db}/documents { match /{d=**} { allow read, write: if false; } }\n"
            "}\n"
        )
        with pytest.raises(ValueError, match="rejected the rules"):
            emulator.load_rules("this is not a rules file")
        groups = {emulator.process.pid}
        needles = [f"--port={emulator.port}", f"--host-port=127.0.0.1:{emulator.port}"]
        assert len(processes_in_groups(groups)) >= 2  # gcloud (python), and java under it
    assert processes_in_groups(groups) == []
    assert processes_mentioning(needles) == []
    assert not tcp_open("127.0.0.1", emulator.port)


def _link(directory: Path, tool: str) -> None:
    """A PATH directory holding only `tool` (a symlink to the real one)."""
    directory.mkdir(parents=True, exist_ok=True)
    found = shutil.which(tool)
    assert found, f"{tool} must be installed for this test"
    (directory / tool).symlink_to(found)


def test_firestore_emulator_fails_loudly_without_its_prerequisites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _link(tmp_path / "only-gcloud", "gcloud")
    _link(tmp_path / "java-only", "java")
    monkeypatch.delenv("JAVA", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RuntimeError, match="gcloud not found"):
        FirestoreEmulator(log_dir=tmp_path).start()

    monkeypatch.setenv("PATH", str(tmp_path / "only-gcloud"))
    with pytest.raises(RuntimeError, match="java not found"):
        FirestoreEmulator(log_dir=tmp_path).start()

    # A gcloud whose SDK has no emulator component.
    fake_sdk_bin = tmp_path / "sdk" / "bin"
    fake_sdk_bin.mkdir(parents=True)
    (fake_sdk_bin / "gcloud").write_text("#!/bin/sh\nexit 1\n")
    (fake_sdk_bin / "gcloud").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_sdk_bin}:{tmp_path / 'java-only'}")
    with pytest.raises(RuntimeError, match="Firestore emulator component missing"):
        FirestoreEmulator(log_dir=tmp_path).start()


# ---------------------------------------------------------------------------------------------
# Cloud Tasks


def test_cloud_tasks_emulator_on_loopback_dispatches_json_intact(
    tmp_path: Path, recorder: tuple[str, list[tuple[str, dict[str, str], bytes]]]
) -> None:
    url, received = recorder
    queues = [queue_id("docs"), queue_id("sec_edgar"), queue_id("aggregate")]
    emulator = CloudTasksEmulator(
        queues=queues, project="demo-devstack", poll_interval=0.02, log_dir=tmp_path
    )
    with emulator:
        assert "(poll every 0.02 s, 5 retries)" in emulator.process.log_path.read_text()
        print(f"cloud tasks emulator ready in {emulator.startup_seconds:.1f} s")
        assert listening_addresses(emulator.port) == {"127.0.0.1"}
        assert emulator.list_queues() == sorted(emulator.queue_path(q) for q in queues)
        assert "fanfuse-sec-edgar" in queues

        queue = emulator.queue_path("fanfuse-docs")
        payload = {"task_id": "t1", "platform": "docs", "query": "naïve — ünïcode"}
        task = tasks_v2.Task(
            name=f"{queue}/tasks/t1--docs",
            http_request=tasks_v2.HttpRequest(
                http_method=tasks_v2.HttpMethod.POST,
                url=f"{url}/run_platform?attempt=1",
                headers={"Content-Type": "application/json"},
                body=json.dumps(payload).encode(),
            ),
        )
        created = emulator.client().create_task(parent=queue, task=task, timeout=5)
        assert created.name.endswith("/tasks/t1--docs")
        wait_until(lambda: len(received) >= 1, 10, "task dispatch")
        path, headers, body = received[0]
        # The URL is used verbatim; the task's headers are kept and X-CloudTasks-* added.
        assert path == "/run_platform?attempt=1"
        assert headers["content-type"] == "application/json"
        assert json.loads(body) == payload
        assert headers["x-cloudtasks-taskname"] == "t1--docs"
        assert headers["x-cloudtasks-queuename"] == queue  # the real service sends the short id
        assert headers["x-cloudtasks-taskretrycount"] == "0"
        assert "authorization" not in headers  # OIDC tokens are ignored by the emulator
        groups = {emulator.process.pid}
    assert processes_in_groups(groups) == []
    assert not tcp_open("127.0.0.1", emulator.port)


def test_cloud_tasks_emulator_bounds_retries_of_a_failing_target(tmp_path: Path) -> None:
    # Nothing listens on `dead`: each attempt fails; max_retries=1 means exactly two attempts.
    dead = free_port()
    with CloudTasksEmulator(queues=["fanfuse-docs"], max_retries=1, log_dir=tmp_path) as emulator:
        queue = emulator.queue_path("fanfuse-docs")
        emulator.client().create_task(
            parent=queue,
            task=tasks_v2.Task(
                http_request=tasks_v2.HttpRequest(url=f"http://127.0.0.1:{dead}/", body=b"{}")
            ),
            timeout=5,
        )
        log = emulator.process.log_path
        wait_until(lambda: "Giving up failed task" in log.read_text(), 10, "giving up")
        assert log.read_text().count("Requesting POST") == 2


class Slow(BaseHTTPRequestHandler):
    """Answers each POST after HOLD_S, counting how many it holds at once."""

    HOLD_S = 1.0

    def do_POST(self) -> None:
        server: Any = self.server
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with server.lock:
            server.now += 1
            server.peak = max(server.peak, server.now)
        time.sleep(self.HOLD_S)
        with server.lock:
            server.now -= 1
            server.done += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


def test_cloud_tasks_emulator_dispatches_several_tasks_of_a_queue_at_once_up_to_its_limit(
    tmp_path: Path,
) -> None:
    """Cloud Tasks has up to the queue's max_concurrent_dispatches in flight (infra/queues.tf);
    the emulator's own dispatcher had one. Nine tasks of one queue, held a second each by the
    target, with a limit of three: three at once, never more, all delivered once."""
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.lock, server.now, server.peak, server.done = threading.Lock(), 0, 0, 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/run_platform"
    emulator = CloudTasksEmulator(
        queues=["fanfuse-docs"], max_concurrent_dispatches=3, poll_interval=0.02, log_dir=tmp_path
    )
    try:
        with emulator:
            assert "3 in flight per queue" in emulator.process.log_path.read_text()
            queue = emulator.queue_path("fanfuse-docs")
            for i in range(9):
                task = tasks_v2.Task(
                    name=f"{queue}/tasks/t{i}",
                    http_request=tasks_v2.HttpRequest(url=url, body=b"{}"),
                )
                emulator.client().create_task(parent=queue, task=task, timeout=5)
            wait_until(lambda: server.done == 9, 30, "nine deliveries")
            time.sleep(0.3)  # a duplicate delivery would show up here
            assert server.done == 9
            assert server.peak == 3
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# ---------------------------------------------------------------------------------------------
# Functions


def test_function_process_serves_and_stops(tmp_path: Path) -> None:
    function = FunctionProcess(
        "search_status",
        env={"FANFUSE_REGION": "test-region"},
        source=FIXTURE_FUNCTIONS,
        log_dir=tmp_path,
    )
    with function:
        print(f"function ready in {function.startup_seconds:.1f} s")
        status, body = http_request("GET", function.url + "/?task_id=x")
        assert status == 200
        answer = json.loads(body)
        assert answer["target"] == "search_status"
        assert answer["env"]["FANFUSE_REGION"] == "test-region"
        assert listening_addresses(function.port) == {"127.0.0.1"}
        groups = {function.process.pid}
        assert len(processes_in_groups(groups)) >= 2  # gunicorn master and worker
    assert processes_in_groups(groups) == []
    assert processes_mentioning([f"--port={function.port}"]) == []


def test_function_process_reports_a_broken_source(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import module_that_does_not_exist\n")
    function = FunctionProcess("start_search", source=broken, log_dir=tmp_path)
    with pytest.raises(RuntimeError, match=r"(?s)exited.*module_that_does_not_exist"):
        function.start()
    assert function.process.survivors() == []
    with pytest.raises(RuntimeError, match="does not exist"):
        FunctionProcess("start_search", source=tmp_path / "nope.py").start()


# ---------------------------------------------------------------------------------------------
# The whole stack


def test_local_stack_wires_everything_and_leaves_nothing(tmp_path: Path) -> None:
    record_dir = tmp_path / "records"
    record_dir.mkdir()
    stack = LocalStack(
        ["docs", "vectors", "sec_edgar"],
        project="demo-devstack",
        source=FIXTURE_FUNCTIONS,
        extra_env={"FANFUSE_TEST_RECORD_DIR": str(record_dir)},
        log_dir=tmp_path / "logs",
    )
    started = time.monotonic()
    with stack as addresses:
        print(f"stack ready in {time.monotonic() - started:.1f} s: {stack.startup_seconds()}")
        lines = dict(stack.describe())
        assert list(lines)[:3] == ["project", "firestore", "cloud_tasks"]
        assert lines["project"] == "demo-devstack"
        assert lines["firestore"] == addresses.firestore == stack.firestore.host
        # The local key: on the banner's last line, in the stack's Firestore (hashed), in no
        # function's environment and in no repr.
        assert list(lines)[-1] == "api_key" and lines["api_key"] == addresses.api_key
        key_id, _ = keys.parse_key(lines["api_key"]) or ("", "")
        stored = FirestoreStore(stack.firestore.client()).get_key(key_id)
        assert stored is not None and stored.owner == "local" and stored.revoked_at is None
        assert addresses.api_key not in repr(addresses) + json.dumps(addresses.env())
        stack.reset_firestore()  # a clean slate keeps the key
        assert FirestoreStore(stack.firestore.client()).get_key(key_id) == stored
        for target in ("start_search", "search_status", "cancel_search", "run_platform"):
            assert lines[target].startswith("http://127.0.0.1:")
        assert stack.tasks.list_queues() == sorted(
            stack.tasks.queue_path(q)
            for q in ("fanfuse-docs", "fanfuse-vectors", "fanfuse-sec-edgar", "fanfuse-aggregate")
        )

        # Each function got the same environment, pointing at the emulators and at each other.
        status, body = http_request("GET", addresses.functions["aggregate"])
        assert status == 200
        env = json.loads(body)["env"]
        assert env["FIRESTORE_EMULATOR_HOST"] == addresses.firestore
        assert env["FANFUSE_TASKS_EMULATOR_HOST"] == addresses.tasks
        assert env["GOOGLE_CLOUD_PROJECT"] == env["FANFUSE_PROJECT"] == "demo-devstack"
        assert json.loads(env["FANFUSE_FUNCTION_URLS"]) == addresses.functions
        assert env["FANFUSE_TASKS_HMAC_SECRET"] == stack.tasks_secret  # what tasks are signed with

        # A platform task travels emulator -> run_platform with its JSON body.
        queue = stack.tasks.queue_path(addresses.queues["docs"])
        stack.tasks.client().create_task(
            parent=queue,
            task=tasks_v2.Task(
                name=f"{queue}/tasks/abc--docs",
                http_request=tasks_v2.HttpRequest(
                    url=addresses.functions["run_platform"],
                    headers={"Content-Type": "application/json"},
                    body=json.dumps({"task_id": "abc", "platform": "docs"}).encode(),
                ),
            ),
            timeout=5,
        )
        wait_until(lambda: any(record_dir.iterdir()), 15, "run_platform delivery")
        record = json.loads(next(record_dir.iterdir()).read_text())
        assert record["target"] == "run_platform"
        assert record["json"] == {"task_id": "abc", "platform": "docs"}

        processes = stack.processes()
        groups = {p.pid for p in processes}
        ports = [stack.firestore.port, stack.tasks.port] + [f.port for f in stack.functions]
        assert stack.page is not None
        ports.append(stack.page.port)
    stopped = time.monotonic()
    assert processes_in_groups(groups) == []
    assert all(p.survivors() == [] for p in processes)
    assert not any(tcp_open("127.0.0.1", port) for port in ports)
    assert processes_mentioning([f"--port={port}" for port in ports]) == []
    stack.stop()  # a second stop is harmless
    assert time.monotonic() - stopped < 5


def test_local_stack_that_fails_to_start_leaves_nothing(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise ImportError('functions cannot load')\n")
    stack = LocalStack(["docs"], source=broken, log_dir=tmp_path / "logs")
    with pytest.raises(RuntimeError, match="functions cannot load"):
        stack.start()
    groups = {p.pid for p in stack.processes()}
    assert len(groups) == 8  # Firestore, Cloud Tasks, the five functions, the page
    assert processes_in_groups(groups) == []


# ---------------------------------------------------------------------------------------------
# Queue names: the stack creates the queues the functions enqueue to, whatever the prefix


def test_local_stack_creates_the_queues_its_functions_enqueue_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing is started: the names and the environment are decided when the stack is built.
    monkeypatch.setenv("FANFUSE_QUEUE_PREFIX", "zz")
    stack = LocalStack(["docs", "sec_edgar"], log_dir=tmp_path)
    assert stack.addresses.queues == {
        "docs": "zz-docs",
        "sec_edgar": "zz-sec-edgar",
        "aggregate": "zz-aggregate",
    }
    assert stack.tasks.queues == ["zz-docs", "zz-sec-edgar", "zz-aggregate"]
    env = stack.addresses.env()
    assert env["FANFUSE_QUEUE_PREFIX"] == "zz"
    assert queue_id("sec_edgar") == "zz-sec-edgar"

    # The queue adapter, configured from exactly what a function is given, targets those queues.
    monkeypatch.delenv("FANFUSE_QUEUE_PREFIX")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    adapter = CloudTasksQueue(Settings())
    queue, _ = adapter.platform_task(PlatformMessage(task_id="t1", platform="sec_edgar"))
    assert queue == stack.tasks.queue_path("zz-sec-edgar")

    explicit = LocalStack(["docs"], queue_prefix="team", log_dir=tmp_path)
    assert explicit.addresses.queues == {"docs": "team-docs", "aggregate": "team-aggregate"}
    assert explicit.addresses.env()["FANFUSE_QUEUE_PREFIX"] == "team"


def test_each_stack_has_its_own_task_secret_and_never_shows_it(tmp_path: Path) -> None:
    one, two = (LocalStack(["docs"], log_dir=tmp_path) for _ in range(2))
    assert one.tasks_secret != two.tasks_secret and len(one.tasks_secret) >= 32
    assert one.addresses.env()["FANFUSE_TASKS_HMAC_SECRET"] == one.tasks_secret
    assert all(p.extra_env["FANFUSE_TASKS_HMAC_SECRET"] == one.tasks_secret for p in one.functions)
    shown = f"{one.describe()} {one.addresses!r} {one.addresses}"
    assert one.tasks_secret not in shown


def start_dev(args: list[str], env: dict[str, str], stderr_path: Path) -> subprocess.Popen[str]:
    """`fanfuse dev ARGS` in a session of its own: its banner on a pipe, its stderr in a file."""
    with stderr_path.open("w") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "fanfuse.cli.main", "dev", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )


def cli_search(endpoint: str, query: str, env: dict[str, str], api_key: str) -> dict[str, Any]:
    """`fanfuse search --endpoint ENDPOINT --json QUERY` with `api_key`: its JSON view."""
    search = subprocess.run(
        [
            sys.executable,
            "-m",
            "fanfuse.cli.main",
            "search",
            "--endpoint",
            endpoint,
            "--json",
            query,
        ],
        env={**env, "FANFUSE_API_KEY": api_key},
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert search.returncode == 0, search.stderr
    view: dict[str, Any] = json.loads(search.stdout)
    return view


def _banner(dev: subprocess.Popen[str], timeout: float, stderr_path: Path) -> dict[str, str]:
    """`fanfuse dev`'s component lines, read until its `ready:` line, bounded in time; past
    the bound, the failure shows what dev wrote to `stderr_path` too."""
    lines: list[str] = []
    done = threading.Event()

    def read() -> None:
        assert dev.stdout is not None
        for line in dev.stdout:
            lines.append(line)
            if line.startswith("ready:"):
                break
        done.set()

    threading.Thread(target=read, daemon=True).start()
    if not done.wait(timeout) or not lines or not lines[-1].startswith("ready:"):
        stderr = stderr_path.read_text(errors="replace")[-3000:]
        raise AssertionError(
            f"fanfuse dev not ready in {timeout} s; printed: {lines}; its stderr: {stderr}"
        )
    return dict(line.split(maxsplit=1) for line in lines[:-1])


def test_local_stack_deploys_exactly_its_platforms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = LocalStack(["sec_edgar", "docs"], log_dir=tmp_path)
    deployed = stack.addresses.env()["FANFUSE_DEPLOYED_PLATFORMS"]
    assert {p.extra_env["FANFUSE_DEPLOYED_PLATFORMS"] for p in stack.functions} == {deployed}
    monkeypatch.setenv("FANFUSE_DEPLOYED_PLATFORMS", deployed)  # as each function reads it
    registry = Registry.from_settings(Settings())
    assert registry.available() == ["docs", "sec_edgar"]
    assert registry.unavailable_reason("vectors") == "not deployed"


def test_fanfuse_dev_with_a_queue_prefix_serves_a_search(tmp_path: Path) -> None:
    # The acceptance, by hand: `FANFUSE_QUEUE_PREFIX=zz fanfuse dev -p docs`, then
    # `fanfuse search --endpoint <start_search> -p docs "..."` completes. The cache directory is
    # the session's (conftest), so docs builds its BM25 index of the bundled corpus at most once.
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
    env |= {
        "FANFUSE_QUEUE_PREFIX": "zz",
        "FANFUSE_CACHE_DIR": os.environ["FANFUSE_CACHE_DIR"],
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "200",
    }
    # With a browser app's origin and the real rules (examples/web-app/README.md).
    args = ["-p", "docs", "--app-origin", APP_ORIGIN, "--rules", str(RULES)]
    dev = start_dev(args, env, tmp_path / "dev.stderr")
    ports: list[int] = []
    try:
        # The stack's start-up bound (the Firestore emulator's, 120 s) and the functions'.
        banner = _banner(dev, timeout=200, stderr_path=tmp_path / "dev.stderr")
        tasks_host = banner["cloud_tasks"].strip()
        ports = [int(banner["firestore"].rsplit(":", 1)[1]), int(tasks_host.rsplit(":", 1)[1])]
        ports += [int(banner[t].rsplit(":", 1)[1]) for t in ("start_search", "run_platform")]
        client = tasks_client(tasks_host)
        try:
            parent = f"projects/{DEFAULT_PROJECT}/locations/{DEFAULT_LOCATION}"
            queues = sorted(q.name for q in client.list_queues(parent=parent, timeout=5))
        finally:
            client.transport.close()  # type: ignore[no-untyped-call]  # google-cloud-tasks: unannotated
        assert queues == [
            queue_path(DEFAULT_PROJECT, DEFAULT_LOCATION, q) for q in ("zz-aggregate", "zz-docs")
        ]

        endpoint = banner["start_search"].strip()
        assert keys.parse_key(banner["api_key"]) is not None
        # -p docs is what every function deploys: a platform outside it is a 400 naming it...
        status, body = http_request(
            "POST",
            endpoint,
            json.dumps({"queries": ["boundary layer"], "platform": "vectors"}).encode(),
            {"Content-Type": "application/json", keys.API_KEY_HEADER: banner["api_key"].strip()},
        )
        assert status == 400 and b"vectors" in body and b"not deployed" in body, body
        # ... and the default selection (all) is docs alone, which completes.
        view = cli_search(endpoint, "boundary layer", env, banner["api_key"].strip())
        assert view["status"] == "completed", view
        assert view["results"] and {r["platform"] for r in view["results"]} == {"docs"}
        check_browser_app(banner)

        dev.send_signal(signal.SIGTERM)
        assert dev.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if dev.poll() is None:
            dev.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                dev.wait(timeout=60)
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait(timeout=10)
        for line in processes_mentioning([f"--port={port}" for port in ports]):
            with contextlib.suppress(ProcessLookupError):  # never leave a stack behind
                os.killpg(os.getpgid(int(line.split(":")[0])), signal.SIGKILL)
    assert ports and processes_mentioning([f"--port={port}" for port in ports]) == []
    assert not any(tcp_open("127.0.0.1", port) for port in ports)


APP_ORIGIN = "http://127.0.0.1:8000"
RULES = Path(__file__).resolve().parents[2] / "infra" / "firestore.rules"


def check_browser_app(banner: dict[str, str]) -> None:
    """`fanfuse dev --app-origin ORIGIN --rules infra/firestore.rules`: the app's address is
    printed, the functions answer the origin's preflight and take a Firebase emulator token as
    its user, and Firestore applies the rules to that user and to another."""
    endpoint = banner["start_search"].strip()
    assert banner["rules"].strip() == str(RULES)
    assert banner["web_app"].strip() == f"{APP_ORIGIN}/?" + urlencode(
        {"project": DEFAULT_PROJECT, "firestore": banner["firestore"].strip(), "api": endpoint}
    )
    preflight = {"Origin": APP_ORIGIN, "Access-Control-Request-Method": "POST"}
    status, _ = http_request("OPTIONS", endpoint, None, preflight)
    assert status == 204
    body = json.dumps({"query": "boundary layer", "platform": "docs"}).encode()
    alice, bob = (token(uid, DEFAULT_PROJECT) for uid in ("alice", "bob"))
    as_alice = {"Content-Type": "application/json", "Authorization": f"Bearer {alice}"}
    status, answer = http_request("POST", endpoint, body, as_alice)
    assert status == 202, answer
    task_id = json.loads(answer)["task_id"]
    documents = f"http://{banner['firestore'].strip()}/v1/projects/{DEFAULT_PROJECT}"
    doc = f"{documents}/databases/(default)/documents/searches/{task_id}"
    status, stored = http_request("GET", doc, None, {"Authorization": f"Bearer {alice}"})
    assert status == 200 and b"firebase:alice" in stored
    assert http_request("GET", doc, None, {"Authorization": f"Bearer {bob}"})[0] == 403


def test_browser_app_flags_are_checked_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert browser_app_problem("gcp", [APP_ORIGIN, "https://app.example.com:8443"], RULES) is None
    for origin in ("http://127.0.0.1:8000/", "127.0.0.1:8000", "http://*.example.com", "null"):
        assert "an origin is scheme://host[:port]" in str(
            browser_app_problem("gcp", [origin], None)
        )
    assert "--cloud gcp" in str(browser_app_problem("aws", [APP_ORIGIN], None))
    assert "--cloud gcp" in str(browser_app_problem("aws", [], RULES))
    assert browser_app_env([]) is None  # no origin: the functions get nothing more
    for name, value in (browser_app_env([APP_ORIGIN]) or {}).items():
        monkeypatch.setenv(name, value)  # as each function reads them
    settings = Settings()
    assert settings.cors_origins == [APP_ORIGIN] and settings.firebase_emulator_tokens
    assert settings.firebase_project == DEFAULT_PROJECT


STACK_SCRIPT = """
import json, sys, time
from pathlib import Path
from fanfuse.tools.devstack.stack import LocalStack
stack = LocalStack(["docs"], source=Path(sys.argv[1]), log_dir=Path(sys.argv[2]))
with stack:
    ports = [stack.firestore.port, stack.tasks.port, *(f.port for f in stack.functions)]
    report = {"groups": [p.pid for p in stack.processes()], "watchdog": stack.watchdog.pid}
    print(json.dumps({**report, "ports": ports}), flush=True)
    while True:
        time.sleep(0.1)
"""


@contextlib.contextmanager
def stack_runner(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """A LocalStack in a child process (STACK_SCRIPT) and its report once ready; afterwards
    nothing is left behind, whatever the test asserted."""
    runner = subprocess.Popen(
        [sys.executable, "-c", STACK_SCRIPT, str(FIXTURE_FUNCTIONS), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    groups: list[int] = []
    try:
        report = json.loads(_read_line(runner, timeout=90))
        groups = report["groups"]
        assert len(groups) == 8  # Firestore, Cloud Tasks, the five functions, the page
        assert processes_in_groups(set(groups))
        yield runner, report
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(timeout=10)
        for pid in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_local_stack_stops_everything_on_a_signal(tmp_path: Path, sig: signal.Signals) -> None:
    with stack_runner(tmp_path) as (runner, report):
        if sig == signal.SIGINT:
            os.killpg(runner.pid, sig)  # what Ctrl-C does: the terminal's foreground group
        else:
            runner.send_signal(sig)
        runner.wait(timeout=30)
        left = processes_in_groups(set(report["groups"]))
    assert left == [], runner.stderr.read() if runner.stderr else ""
    if sig == signal.SIGTERM:
        assert runner.returncode == 128 + signal.SIGTERM


def _read_line(process: subprocess.Popen[str], timeout: float) -> str:
    """First stdout line of `process`, bounded in time (readline alone could block forever)."""
    result: list[str] = []
    out = process.stdout
    assert out is not None
    reader = threading.Thread(target=lambda: result.append(out.readline()))
    reader.daemon = True
    reader.start()
    reader.join(timeout)
    if not result or not result[0]:
        stderr = ""
        if process.poll() is not None and process.stderr is not None:
            stderr = process.stderr.read()
        raise AssertionError(f"stack did not report ready in {timeout} s: {stderr}")
    return result[0]


def test_local_stack_killed_with_sigkill_leaves_nothing(tmp_path: Path) -> None:
    # No handler runs on SIGKILL: the stack's watchdog (its own session, reading a pipe only the
    # stack holds) sees EOF and stops every child session, grandchildren (gcloud -> java) too.
    with stack_runner(tmp_path) as (runner, report):
        groups, ports, guard = set(report["groups"]), report["ports"], report["watchdog"]
        before = processes_in_groups(groups)
        assert len(before) > len(groups)  # grandchildren included
        assert any("java" in line for line in before), before
        assert all(tcp_open("127.0.0.1", port) for port in ports)
        os.killpg(runner.pid, signal.SIGKILL)  # the stack's whole process group, at once
        runner.wait(timeout=10)
        started = time.monotonic()
        wait_until(lambda: not processes_in_groups(groups), 30, "children gone after SIGKILL")
        print(f"children gone {time.monotonic() - started:.1f} s after SIGKILL")
        wait_until(lambda: not processes_in_groups({guard}), 10, "watchdog exited")
        assert not any(tcp_open("127.0.0.1", port) for port in ports)
