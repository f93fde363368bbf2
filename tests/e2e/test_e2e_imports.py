"""Each function imports what its target uses: a worker for one platform loads no other one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from fanfuse.auth.keys import API_KEY_HEADER
from fanfuse.auth.task_deliveries import SIGNATURE_HEADER
from fanfuse.tools.devstack.functions_host import DEFAULT_FUNCTIONS_SOURCE
from tests.support.e2e.cloud import Cloud, make_task

PROBE = """
import importlib.util, json, os, sys
import flask
spec = importlib.util.spec_from_file_location("main", sys.argv[1])
main = importlib.util.module_from_spec(spec)
spec.loader.exec_module(main)
target, method, body, headers = sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
app = flask.Flask("probe")
path = "/" + (json.loads(body).get("task_id", "") if method == "GET" else "")
with app.test_request_context(path, method=method, data=body if method == "POST" else None,
                              content_type="application/json", headers=headers):
    response = getattr(main, target)(flask.request)
print(json.dumps({
    "status": response.status_code,
    "body": response.get_json(),
    "platforms": sorted(m for m in sys.modules if m.startswith("fanfuse.platforms.")),
    "tasks_client": "google.cloud.tasks_v2" in sys.modules,
    "torch": "torch" in sys.modules,
    "httpx": "httpx" in sys.modules,
}))
"""


def probe(e2e: Cloud, target: str, method: str, body: dict[str, Any]) -> dict[str, Any]:
    """Import functions/main.py in a fresh process, serve one request, list what got imported.

    It carries the stack's API key, and a POST is signed as the queue signs task deliveries.
    """
    env = {**e2e.addresses.env(), **e2e.env, "PATH": "/usr/bin:/bin"}
    data = json.dumps(body)
    headers = {API_KEY_HEADER: e2e.addresses.api_key or ""}  # the caller's key
    if method == "POST":
        headers[SIGNATURE_HEADER] = e2e.signature(target, data.encode())  # as the queue signs
    if "PYTHONPATH" in os.environ:  # a checkout run without installing it: import that one
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            str(DEFAULT_FUNCTIONS_SOURCE),
            target,
            method,
            data,
            json.dumps(headers),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parent,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_platform_worker_imports_only_its_platform(e2e: Cloud) -> None:
    e2e.store.create(*make_task("imp1", ["docs", "vectors"]))
    worker = probe(e2e, "run_platform", "POST", {"task_id": "imp1", "platform": "docs"})
    assert worker["status"] == 200 and worker["body"]["outcome"] == "succeeded", worker
    # the package's, no adapter: the contract, the prices, the local corpora's manifests (read
    # by every registry; a cloud worker finds none, and imports no retrieval module for that)
    shared = [
        "fanfuse.platforms.contract",
        "fanfuse.platforms.corpora",
        "fanfuse.platforms.pricing",
    ]
    assert worker["platforms"] == sorted([*shared, "fanfuse.platforms.docs"])
    assert not worker["torch"]  # the vectors model stays out of a docs worker
    assert not worker["tasks_client"]  # not the last platform: nothing to enqueue

    status = probe(e2e, "search_status", "GET", {"task_id": "imp1"})
    assert status["status"] == 200 and status["body"]["task_id"] == "imp1"
    assert status["platforms"] == shared
    assert not status["tasks_client"] and not status["torch"]
    assert not status["httpx"]  # no network client where a status answers from the store


def test_a_vectors_worker_imports_no_torch(e2e: Cloud) -> None:
    """The vectors model runs on ONNX Runtime: a vectors worker answers without torch."""
    e2e.store.create(*make_task("imp2", ["vectors"]))
    worker = probe(e2e, "run_platform", "POST", {"task_id": "imp2", "platform": "vectors"})
    assert worker["status"] == 200 and worker["body"]["outcome"] == "succeeded", worker
    assert "fanfuse.platforms.vectors" in worker["platforms"]
    assert not worker["torch"]
