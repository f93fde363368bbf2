"""The rehearsal's published corpus (issue 33): a team's handbook, deployed and searched.

Each rehearsal deploys two platforms over one published corpus: `handbook` (engine docs, BM25)
and `handbook_vectors` (engine vectors, MiniLM on ONNX Runtime), through the Terraform variables
an operator sets (corpus.tf's `corpus_platforms`, and the platforms' queues). On AWS they are in
infra/examples/aws.tfvars itself, whose apply creates the corpus bucket; on Google Cloud, whose
Terraform is rendered rather than applied, `var_file` adds them to the example deployment and
the Cloud Storage emulator holds the bucket. Then, as docs/deploy.md tells the operator, the
rehearsal publishes the corpus with `fanfuse index handbook --publish URL` (PUBLISH) to that
bucket, searches it through the public API, and checks that every corpus platform answered from
the version it published. It also measures a `vectors` worker's cold start from the installed
artifact: the entry module's import, then the first search (download, hashes, model), then a
warm one.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from fanfuse_deploy import package

BUCKET = "rehearsal-corpora"
CORPUS = "handbook"
GCS_URL = f"gs://{BUCKET}/{CORPUS}"
"""The GCP rehearsal's corpus, on the Cloud Storage emulator (AWS's is where Terraform put it)."""
PLATFORMS = {"handbook": "docs", "handbook_vectors": "vectors"}
QUEUE_LIMITS = {"rate": 50, "concurrency": 20, "max_attempts": 3}
QUERY = "when are expense reports due"
DOCUMENTS = {
    "expenses.md": "# Expense reports\n\nExpense reports are due on the fifth working day of "
    "each month; attach every receipt.\n",
    "laptops.md": "# Laptops\n\nEvery laptop is replaced after three years; ask the service "
    "desk for a new one.\n",
    "holidays.md": "# Holidays\n\nEach employee has twenty-five days of paid holiday a year, "
    "booked in the HR portal.\n",
    "security.md": "# Security\n\nBadges must be worn visibly; report a lost badge to security "
    "at once.\n",
}
TERMINAL = {"completed", "partial", "failed", "cancelled"}
PUBLISH = f"fanfuse index {CORPUS} --publish $CORPUS_URL"
"""docs/deploy.md's publishing command, run in the folder holding the corpus's folder."""


def say(message: str) -> None:
    print(f"rehearsal: {message}", flush=True)


def var_file(work: Path, var_files: list[Path]) -> Path:
    """A var file, after the GCP rehearsal's own, adding the corpus platforms to the deployment:
    their queues (`platforms` keeps the ones already there), the bucket, the corpus each reads.
    Written as HCL object syntax with JSON values (`name = {...}`), as a tfvars file may be.
    (AWS's example var file names its corpus platforms itself: infra/examples/aws.tfvars.)"""
    platforms: Any = package.variables("gcp", var_files)["platforms"]
    platforms = {**platforms, **{name: QUEUE_LIMITS for name in PLATFORMS}}
    corpora = {name: {"engine": engine, "corpus": CORPUS} for name, engine in PLATFORMS.items()}
    values = {"platforms": platforms, "corpus_bucket": BUCKET, "corpus_platforms": corpora}
    path = work / "corpus.tfvars"
    path.write_text("".join(f"{name} = {json.dumps(value)}\n" for name, value in values.items()))
    return path


def publish(corpus_url: str, work: Path, store_env: Mapping[str, str]) -> str:
    """PUBLISH from the operator's machine (this venv) against the deployment's bucket (the
    emulator's or moto's, by `store_env`); returns the version it made current."""
    folder = work / "corpus" / CORPUS
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text, encoding="utf-8")
    beside = Path(sys.executable).parent / "fanfuse"
    fanfuse = str(beside) if beside.exists() else shutil.which("fanfuse") or "fanfuse"
    env = {**os.environ, **store_env, "FANFUSE_CACHE_DIR": str(work / "operator-cache")}
    command = shlex.split(PUBLISH.replace("$CORPUS_URL", corpus_url))
    say(f"$ {PUBLISH}  (CORPUS_URL={corpus_url})")
    done = subprocess.run(
        [fanfuse, *command[1:]], cwd=folder.parent, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"rehearsal FAILED: fanfuse index --publish:\n{done.stderr[-3000:]}")
    last = done.stdout.strip().splitlines()[-1]
    say(f"fanfuse index {folder.name}/ --publish {corpus_url}: {last}")
    return last.split(" version ")[1].split(" ")[0]


def search(
    start_url: str,
    api_key: str,
    versions: Collection[str],
    platforms: Sequence[str] = tuple(PLATFORMS),
    public: tuple[str, str] | None = None,
    deadline_s: float = 150.0,
) -> None:
    """Search the corpus through the public API, as an app would, on the corpus platforms:
    each must find the handbook's expense page from a version the rehearsal published.
    `public`: as rehearsal.search_as_an_app's (the status_url is the deployment's public one)."""
    from fanfuse_deploy.rehearsal import http_json, local_status_url

    headers = {"X-Api-Key": api_key}
    body = {"query": QUERY, "platform": list(platforms), "max_results": 5, "cache": "bypass"}
    status, started = http_json("POST", start_url, body, headers)
    if status != 202:
        raise SystemExit(f"rehearsal FAILED: start_search over the corpus: {status} {started}")
    status_url = local_status_url(str(started["status_url"]), public)
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        status, view = http_json("GET", status_url, None, headers)
        if status != 200:
            raise SystemExit(f"rehearsal FAILED: search_status answered {status}: {view}")
        if view.get("status") in TERMINAL:
            check(view, set(versions), platforms)
            return
        time.sleep(0.5)
    raise SystemExit(f"rehearsal FAILED: the corpus search was not final after {deadline_s:.0f} s")


def check(view: Mapping[str, Any], versions: set[str], platforms: Sequence[str]) -> None:
    """Completed, every corpus platform succeeded and ranked the expense page first among the
    fused results, every result from a published version."""
    runs = {run["name"]: run for run in view.get("platform_runs") or []}
    problems = [
        f"{name}: {runs[name].get('state')} {runs[name].get('error') or ''}"
        if name in runs
        else f"{name}: did not run"
        for name in platforms
        if runs.get(name, {}).get("state") != "succeeded"
    ]
    results = view.get("results") or []
    if view.get("status") != "completed" or problems or not results:
        raise SystemExit(f"rehearsal FAILED: corpus search {view.get('status')}: {problems}")
    top = results[0]
    answered = {r.get("metadata", {}).get("corpus_version") for r in results}
    by = sorted(top.get("platforms") or [])
    if top.get("title") != "Expense reports" or not answered <= versions or by != sorted(platforms):
        found = f"{top.get('title')!r} from {by}, versions {answered}"
        raise SystemExit(f"rehearsal FAILED: the corpus search found {found}")
    shown = ", ".join(sorted(answered))
    say(f"corpus search: completed, first {top['title']!r} from {', '.join(by)}, version {shown}")


COLD_START = """
import asyncio, json, sys, time
started = time.perf_counter()
import {module}
imported = time.perf_counter()
from fanfuse.platforms import Registry
from fanfuse.platforms.contract import PlatformContext, SearchParams
from fanfuse.runtimes import cloud
platform = Registry.from_settings(cloud.settings()).get({name!r})
params = SearchParams(queries=[{query!r}], limit=5)
def run():
    before = time.perf_counter()
    [hits] = asyncio.run(platform.search(PlatformContext(settings=platform.settings()), params))
    return time.perf_counter() - before, hits
first, hits = run()
warm, _ = run()
print(json.dumps({{
    "import_s": round(imported - started, 3),
    "first_search_s": round(first, 3),
    "warm_search_s": round(warm, 3),
    "top": hits[0].title,
    "version": hits[0].metadata.get("corpus_version"),
    "torch_imported": "torch" in sys.modules,
}}))
"""


def vectors_cold_start(
    python: str,
    cwd: Path,
    env: Mapping[str, str],
    module: str,
    version: str,
    platform: str = "handbook_vectors",
) -> dict[str, Any]:
    """A `vectors` corpus platform's (`platform`) worker's cold start from the installed
    artifact, in a fresh process with the function's environment and an empty /tmp cache: the
    entry module's import, the first search (the corpus read and checked, the model loaded), a
    warm search."""
    cache = cwd.parent / "cold-start-cache"
    shutil.rmtree(cache, ignore_errors=True)
    code = COLD_START.format(module=module, name=platform, query=QUERY)
    done = subprocess.run(
        [python, "-c", code],
        cwd=cwd,
        env={**env, "FANFUSE_CACHE_DIR": str(cache)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        failed = done.stderr[-3000:]
        raise SystemExit(f"rehearsal FAILED: the vectors worker's cold start:\n{failed}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if figures["torch_imported"] or figures["version"] != version:
        raise SystemExit(f"rehearsal FAILED: the vectors worker's cold start: {figures}")
    say(
        f"vectors worker cold start: import {figures['import_s']} s, first search "
        f"{figures['first_search_s']} s (corpus read and checked, model loaded), warm search "
        f"{figures['warm_search_s']} s; torch not imported"
    )
    return figures
