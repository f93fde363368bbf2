"""The SSE figure of issue 9: one search's event stream from `fanfuse serve`, summarized.

Run from the repository root with the venv active: `python scripts/figures/sse_stream.py`.
Two searxng instances on the local stub (127.0.0.1) answer after 0.4 s and 1.5 s, so the stream
shows progress before the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

import httpx

from fanfuse.tools.stubs import StubSearxServer


def summary(data: dict[str, Any]) -> str:
    runs = data.get("platform_runs") or []
    states = " ".join(f"{r['name']}={r['state']}:{r['percent']:.0f}%" for r in runs)
    progress = data["progress"]
    return (
        f"status={data['status']} percent={progress['percent']:.1f} "
        f"message={progress['message']!r} [{states}] results={len(data.get('results') or [])}"
    )


def main() -> None:
    stub = StubSearxServer().start()
    platforms = {
        "quick": {"engine": "searxng", "settings": {"base_url": stub.url("delay/0.4")}},
        "slow": {"engine": "searxng", "settings": {"base_url": stub.url("delay/1.5")}},
    }
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
        env["FANFUSE_DB_PATH"] = f"{tmp}/sse.db"
        env["FANFUSE_EXTRA_PLATFORMS"] = json.dumps(platforms)
        command = [
            sys.executable,
            "-m",
            "fanfuse.cli.main",
            "serve",
            "--port",
            "0",
            "--warm",
            "none",
        ]
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().split()[1]
            key = {"X-Api-Key": proc.stdout.readline().split()[1]}  # the `api_key` line
            assert proc.stdout.readline().strip() == "ready"
            body = {"query": "plasma", "platform": "quick, slow", "max_results": 3}
            started = httpx.post(f"{url}/start_search", json=body, headers=key)
            events = f"{url}/search_status/{started.json()['task_id']}/events"
            with httpx.stream("GET", events, timeout=30, headers=key) as answer:
                for line in answer.iter_lines():
                    if line.startswith("data: "):
                        print("data:", summary(json.loads(line.removeprefix("data: "))))
                    elif line:
                        print(line)
        finally:
            proc.terminate()
            proc.wait(10)
            stub.stop()


if __name__ == "__main__":
    main()
