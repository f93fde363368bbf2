"""The rehearsal's published corpus (issue 33): a team's handbook, deployed and searched.

Each rehearsal adds two platforms over one published corpus to the deployment it rehearses:
`handbook` (engine docs, BM25) and `handbook_vectors` (engine vectors, MiniLM on ONNX Runtime),
through the Terraform variables an operator would set (corpus.tf's `corpus_bucket`,
`corpus_platforms`, and the platforms' queues). Then, as docs/deploy.md tells the operator, it
publishes the corpus with `fanfuse index DIR --publish URL` to the local bucket (moto's S3, or
the Cloud Storage emulator), searches it through the public API, and checks that both platforms
answered from the version it published. It also measures a `vectors` worker's cold start from
the installed artifact: the entry module's import, then the first search (download, hashes,
model), then a warm one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fanfuse_deploy import package

BUCKET = "rehearsal-corpora"
CORPUS = "handbook"
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


def say(message: str) -> None:
    print(f"rehearsal: {message}", flush=True)


def url(cloud: str) -> str:
    return f"{'gs' if cloud == 'gcp' else 's3'}://{BUCKET}/{CORPUS}"


def var_file(cloud: str, work: Path, var_files: list[Path]) -> Path:
    """A var file, after the rehearsal's own, adding the corpus platforms to the deployment:
    their queues (`platforms` keeps the ones already there), the bucket, the corpus each reads.
    Written as HCL object syntax with JSON values (`name = {...}`), as a tfvars file may be."""
    platforms: Any = package.variables(cloud, var_files)["platforms"]
    if cloud == "gcp":
        platforms = {**platforms, **{name: QUEUE_LIMITS for name in PLATFORMS}}
    else:
        # A Lambda zip holds at most 250 MB unzipped: the web platforms' extra (page content)
        # beside vectors' model and runtime is ~300 MB, so the AWS rehearsal deploys the corpus
        # platforms with `docs` alone (docs/corpora.md: such a deployment needs no `web`).
        platforms = ["docs", *PLATFORMS]
    corpora = {name: {"engine": engine, "corpus": CORPUS} for name, engine in PLATFORMS.items()}
    values = {"platforms": platforms, "corpus_bucket": BUCKET, "corpus_platforms": corpora}
    path = work / "corpus.tfvars"
    path.write_text("".join(f"{name} = {json.dumps(value)}\n" for name, value in values.items()))
    return path


def publish(cloud: str, work: Path, store_env: Mapping[str, str]) -> str:
    """`fanfuse index DIR --publish URL` from the operator's machine (this venv), against the
    local bucket; returns the version it made current."""
    folder = work / "corpus" / CORPUS
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text, encoding="utf-8")
    beside = Path(sys.executable).parent / "fanfuse"
    fanfuse = str(beside) if beside.exists() else shutil.which("fanfuse") or "fanfuse"
    env = {**os.environ, **store_env, "FANFUSE_CACHE_DIR": str(work / "operator-cache")}
    command = [fanfuse, "index", str(folder), "--publish", url(cloud)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"rehearsal FAILED: fanfuse index --publish:\n{done.stderr[-3000:]}")
    last = done.stdout.strip().splitlines()[-1]
    say(f"fanfuse index {folder.name}/ --publish {url(cloud)}: {last}")
    return last.split(" version ")[1].split(" ")[0]


def publish_to_moto(work: Path, endpoint: str, region: str) -> str:
    """The bucket Terraform would create (corpus.tf), on moto's S3, then `publish` to it."""
    import boto3

    from fanfuse.tools.devstack.aws import AWS_DUMMY_ENV

    env = {**AWS_DUMMY_ENV, "AWS_DEFAULT_REGION": region, "AWS_ENDPOINT_URL_S3": endpoint}
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    s3.create_bucket(Bucket=BUCKET)
    return publish("aws", work, env)


def search(start_url: str, api_key: str, version: str, deadline_s: float = 150.0) -> None:
    """Search the corpus through the public API, as an app would, on both corpus platforms."""
    from fanfuse_deploy.rehearsal import http_json

    headers = {"X-Api-Key": api_key}
    body = {"query": QUERY, "platform": list(PLATFORMS), "max_results": 5, "cache": "bypass"}
    status, started = http_json("POST", start_url, body, headers)
    if status != 202:
        raise SystemExit(f"rehearsal FAILED: start_search over the corpus: {status} {started}")
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        status, view = http_json("GET", str(started["status_url"]), None, headers)
        if status != 200:
            raise SystemExit(f"rehearsal FAILED: search_status answered {status}: {view}")
        if view.get("status") in TERMINAL:
            check(view, version)
            return
        time.sleep(0.5)
    raise SystemExit(f"rehearsal FAILED: the corpus search was not final after {deadline_s:.0f} s")


def check(view: Mapping[str, Any], version: str) -> None:
    runs = {run["name"]: run for run in view.get("platform_runs") or []}
    problems = [
        f"{name}: {run.get('state')} {run.get('error') or ''}"
        for name, run in runs.items()
        if run.get("state") != "succeeded"
    ]
    results = view.get("results") or []
    if view.get("status") != "completed" or problems or not results:
        raise SystemExit(f"rehearsal FAILED: corpus search {view.get('status')}: {problems}")
    top = results[0]
    answered = {r.get("metadata", {}).get("corpus_version") for r in results}
    if top.get("title") != "Expense reports" or answered != {version}:
        found = f"{top.get('title')!r} from versions {answered}"
        raise SystemExit(f"rehearsal FAILED: the corpus search found {found}")
    by = sorted(top.get("platforms") or [])
    say(f"corpus search: completed, first {top['title']!r} from {', '.join(by)}, version {version}")


COLD_START = """
import asyncio, json, sys, time
started = time.perf_counter()
import {module}
imported = time.perf_counter()
from fanfuse.platforms import Registry
from fanfuse.platforms.base import PlatformContext, SearchParams
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
    python: str, cwd: Path, env: Mapping[str, str], module: str, version: str
) -> dict[str, Any]:
    """A `handbook_vectors` worker's cold start from the installed artifact, in a fresh process
    with the function's environment and an empty /tmp cache: the entry module's import, the
    first search (the corpus read and checked, the model loaded), a warm search."""
    cache = cwd.parent / "cold-start-cache"
    shutil.rmtree(cache, ignore_errors=True)
    code = COLD_START.format(module=module, name="handbook_vectors", query=QUERY)
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
