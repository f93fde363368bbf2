"""A deployment rehearsed on this machine: everything a deploy does except talk to the cloud.

    scripts/deploy-rehearsal gcp    (infra/ + infra/examples/gcp.tfvars)
    scripts/deploy-rehearsal aws    (infra/aws + infra/examples/aws.tfvars)

On AWS the rehearsal goes further and applies the Terraform itself (aws_rehearsal.py: apply to
moto, read back, search on what was created, plan again, destroy). On Google Cloud, where no
provider can be installed here:

1. build the artifact the deploy ships, with the deploy's own script (package.py), without
   fanfuse.tools and within the cloud's limits (limits.py);
2. install it into a clean environment for the runtime's Python, from its own requirements, as
   the cloud would (GCP: a venv and `pip install -r requirements.txt`; Lambda: the unzipped tree
   on the path of a bare interpreter, as /var/task is);
3. render the environment Terraform gives each function (render.py), start each function from the
   installed artifact with exactly that environment, plus only what points it at the local
   stand-ins (the emulators or moto, and the task secret that stands in for Cloud Tasks' OIDC
   token, which the emulator does not send);
4. create the first API key as docs/deploy.md tells the operator, and run a search through the
   public API as an app would: HTTP, authenticated with that key, until the search is final;
5. print `rehearsal ok`. Any failure exits non-zero with what failed.

The local stand-ins are fanfuse.tools.devstack's (the Firestore and Cloud Tasks emulators, moto's
server), so the rehearsal runs what the tests run; the functions themselves run from the
artifact, where fanfuse.tools is not.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from fanfuse_deploy import corpus, limits, package, render

if TYPE_CHECKING:
    from fanfuse.tools.devstack.processes import Component

QUERY = "dielectric constant of water at microwave frequencies"
REHEARSALS = (
    "scripts/deploy-rehearsal gcp",
    "scripts/deploy-rehearsal aws",
    "scripts/deploy-rehearsal aws infra/examples/aws-web.tfvars",
)
"""The rehearsals CI runs (tests/infra/test_rehearsal.py), as docs/deploy.md gives them."""
GCP_RUNBOOK = {
    "package": "scripts/package-functions gcp build/function.zip infra/examples/gcp.tfvars",
    "keys": "FANFUSE_PROJECT=$PROJECT fanfuse keys create --owner my-app --firestore",
}
"""docs/deploy.md's Google Cloud commands the gcp rehearsal runs (aws_rehearsal.RUNBOOK: AWS's)."""
TERMINAL = {"completed", "partial", "failed", "cancelled"}


def say(message: str) -> None:
    print(f"rehearsal: {message}", flush=True)


def shown(var_files: list[Path]) -> str:
    return " ".join(
        str(p.relative_to(render.ROOT)) if p.is_relative_to(render.ROOT) else str(p)
        for p in var_files
    )


def find_python(version: str) -> str:
    """An interpreter of exactly the runtime's version (the functions' wheels are built for it):
    FANFUSE_REHEARSAL_PYTHON, pythonX.Y on PATH, a pyenv version, or `uv python find`."""
    candidates = [os.environ.get("FANFUSE_REHEARSAL_PYTHON"), shutil.which(f"python{version}")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += [str(p) for p in sorted(pyenv.glob(f"{version}*/bin/python{version}"))]
    uv = shutil.which("uv")
    if uv is not None:
        found = subprocess.run([uv, "python", "find", version], capture_output=True, text=True)
        candidates.append(found.stdout.strip() if found.returncode == 0 else None)
    for candidate in candidates:
        if not candidate:
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate
    raise SystemExit(
        f"rehearsal FAILED: no Python {version} (the deployed runtime's) found: install it "
        "(pyenv install, or `uv python install`) or set FANFUSE_REHEARSAL_PYTHON"
    )


def clean_env(extra: Mapping[str, str]) -> dict[str, str]:
    """A function's process environment: nothing of this process's (no PYTHONPATH pointing at
    the sources, no venv), only what the platform itself provides and `extra`."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def pip_cache() -> str:
    """pip's own cache (wheels reused between runs; what is installed is still resolved anew)."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True
    )
    return out.stdout.strip() or str(Path.home() / ".cache" / "pip")


def site_packages_mb(root: Path) -> float:
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    return round(total / 1e6, 1)


def cold_import(python: str, module: str, cwd: Path, env: Mapping[str, str]) -> float:
    """Best of three: seconds to import the entry module in a fresh interpreter."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    times = []
    for _ in range(3):
        out = subprocess.run(
            [python, "-c", code], cwd=cwd, env=dict(env), capture_output=True, text=True
        )
        if out.returncode != 0:
            raise SystemExit(f"rehearsal FAILED: import {module}:\n{out.stderr[-3000:]}")
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return round(min(times), 3)


def unzip(archive: Path, into: Path) -> Path:
    with zipfile.ZipFile(archive) as handle:
        handle.extractall(into)
    return into


def http_json(
    method: str, url: str, body: object | None, headers: Mapping[str, str]
) -> tuple[int, dict[str, object]]:
    from urllib.parse import urlsplit

    from fanfuse.tools.devstack.processes import http_request

    if urlsplit(url).hostname not in ("127.0.0.1", "::1", "localhost"):
        raise SystemExit(
            f"rehearsal FAILED: {url} is not on this machine: the rehearsal calls none"
        )
    data = None if body is None else json.dumps(body).encode()
    status, raw = http_request(
        method, url, data, {"Content-Type": "application/json", **headers}, timeout=30.0
    )
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError:
        parsed = {"raw": raw[:500].decode(errors="replace")}
    return status, parsed


def search_as_an_app(
    start_url: str,
    api_key: str,
    deadline_s: float = 150.0,
    public: tuple[str, str] | None = None,
) -> dict[str, object]:
    """POST the search, then follow its status_url until it is final (bounded). `public`:
    (the deployment's public base URL, the local address standing in for it): the status_url
    must be under the public one, and is followed at the local one."""
    headers = {"X-Api-Key": api_key}
    status, body = http_json("POST", start_url, {"query": QUERY, "platform": ["docs"]}, {})
    if status != 401:
        raise SystemExit(f"rehearsal FAILED: a call with no credential got {status}, not 401")
    say("start_search with no credential: 401")
    status, body = http_json(
        "POST", start_url, {"query": QUERY, "platform": ["docs"], "max_results": 5}, headers
    )
    if status != 202:
        raise SystemExit(f"rehearsal FAILED: start_search answered {status}: {body}")
    say(f"start_search 202 task {body['task_id']}")
    status_url = local_status_url(str(body["status_url"]), public)
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        status, view = http_json("GET", status_url, None, headers)
        if status != 200:
            raise SystemExit(f"rehearsal FAILED: search_status answered {status}: {view}")
        if view.get("status") in TERMINAL:
            results = view.get("results") or []
            assert isinstance(results, list)
            if view["status"] != "completed" or not results:
                raise SystemExit(f"rehearsal FAILED: search ended {view['status']}: {view}")
            say(f"search_status: completed, {len(results)} results, first: {results[0]['title']!r}")
            return view
        time.sleep(0.5)
    raise SystemExit(f"rehearsal FAILED: the search was not final after {deadline_s:.0f} s")


def local_status_url(status_url: str, public: tuple[str, str] | None) -> str:
    """`status_url` as this machine reaches it: with `public` (the deployment's public base URL,
    the local address standing in for it), the URL must be under the public one."""
    if public is None:
        return status_url
    base, local = public
    if not status_url.startswith(base + "/"):
        raise SystemExit(f"rehearsal FAILED: status_url {status_url} is not under {base}")
    say(f"status_url {status_url}: followed at {local}")
    return local + status_url[len(base) :]


def build_artifact(
    cloud: str, work: Path, var_files: list[Path]
) -> tuple[str, str, list[str], Path]:
    """The runtime's Python version and an interpreter of it (found first: without one the
    rehearsal cannot run), the deployed platforms, and the artifact built as the deploy does."""
    version = package.runtime_python(cloud, var_files)
    python = find_python(version)
    platforms = package.deployed_platforms(cloud, var_files)
    extras = package.deployed_extras(cloud, var_files)
    archive = work / ("function.zip" if cloud == "gcp" else "lambda.zip")
    say(f"$ scripts/package-functions {cloud} build/{archive.name} {shown(var_files)}")
    if cloud == "gcp":
        package.package_gcp(archive, extras)
    else:
        package.package_aws(archive, extras, version)
    return version, python, platforms, archive


# -- Google Cloud ---------------------------------------------------------------------------------


def rehearse_gcp(work: Path, var_files: list[Path]) -> None:
    from fanfuse.tools.devstack.firestore_emulator import FirestoreEmulator
    from fanfuse.tools.devstack.functions_host import FunctionProcess
    from fanfuse.tools.devstack.processes import free_port
    from fanfuse.tools.devstack.stack import queue_id
    from fanfuse.tools.devstack.storage import StorageEmulator
    from fanfuse.tools.devstack.tasks_emulator import CloudTasksEmulator

    var_files = [*var_files, corpus.var_file(work, var_files)]  # the published corpus
    version, python, platforms, archive = build_artifact("gcp", work, var_files)
    source = unzip(archive, work / "function")
    say(f"requirements.txt: {(source / 'requirements.txt').read_text().strip()}")
    venv = work / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    say(f"install: python{version} -m venv; pip install -r requirements.txt (as the build does)")
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
         "-r", "requirements.txt"],
        cwd=source, check=True, env=clean_env({"PIP_CACHE_DIR": pip_cache()}),
    )  # fmt: skip
    (site,) = venv.glob("lib/python*/site-packages")
    say(f"installed: {site_packages_mb(site)} MB in site-packages")
    # Cloud Functions' limits on the source and on the source with its modules (limits.py), and
    # no development tools: the functions below run without them.
    sizes = limits.Sizes.of(archive)
    installed = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    limits.refuse(limits.check_gcf(sizes, installed), "the Cloud Functions source")
    if package.development_files(archive):
        raise SystemExit("rehearsal FAILED: the source ships fanfuse/tools")
    say(f"source: {sizes}; with its modules {(sizes.unzipped + installed) / limits.MB:.1f} MB "
        f"(limits: {limits.GCF_SOURCE_ZIPPED // limits.MB} MB compressed, "
        f"{limits.GCF_SOURCE_AND_MODULES // limits.MB} MB with modules); "
        "no fanfuse/tools")  # fmt: skip

    ports = {target: free_port() for target in render.GCP_FUNCTIONS}
    urls = {target: f"http://127.0.0.1:{port}" for target, port in ports.items()}
    module = render.gcp_module(var_files, urls=urls)
    project = str(module.variables["project_id"])
    secret_values = {env: f"rehearsal-{secret}" for env, secret in module.local("secrets").items()}
    environments = render.gcp_environments(module, secret_values)
    say(f"rendered the environment of {', '.join(environments)} from infra/ + {shown(var_files)}")
    tasks_secret = secrets.token_urlsafe(32)
    prefix = str(environments["start_search"].get("FANFUSE_QUEUE_PREFIX", "fanfuse"))
    queues = [queue_id(p, prefix) for p in [*platforms, "aggregate"]]
    firestore = FirestoreEmulator(project=project, log_dir=work / "logs")
    tasks = CloudTasksEmulator(
        queues=queues, project=project, location=str(module.variables["region"]),
        log_dir=work / "logs",
    )  # fmt: skip
    storage = StorageEmulator(buckets=(corpus.BUCKET,), log_dir=work / "logs")
    started: list[Component] = []
    try:
        for component in (firestore, tasks, storage):
            component.start()
            started.append(component)
        local = {
            "FIRESTORE_EMULATOR_HOST": firestore.host,
            "FANFUSE_TASKS_EMULATOR_HOST": tasks.host,
            "FANFUSE_TASKS_HMAC_SECRET": tasks_secret,
            "STORAGE_EMULATOR_HOST": storage.host,
        }
        run_env = clean_env({**environments["run_platform"], **local})
        seconds = cold_import(str(venv / "bin" / "python"), "main", source, run_env)
        say(f"cold import of main (the five functions' module): {seconds} s")
        functions = []
        for target in render.GCP_FUNCTIONS:
            function = FunctionProcess(
                target, ports[target], source=source / "main.py", log_dir=work / "logs"
            )
            function.process.argv = [
                str(venv / "bin" / "functions-framework"), f"--target={target}",
                f"--source={source / 'main.py'}", "--host=127.0.0.1", f"--port={ports[target]}",
            ]  # fmt: skip
            function.process.env = clean_env({**environments[target], **local})
            function.process.start()
            function._started_at = time.monotonic()
            functions.append(function)
            started.append(function)
        for function in functions:
            function.wait_ready()
        say("the five functions started from the installed artifact")
        key = create_key_gcp(project, firestore.host)
        search_as_an_app(urls["start_search"], key)
        published = corpus.publish(corpus.GCS_URL, work, {"STORAGE_EMULATOR_HOST": storage.host})
        corpus.search(urls["start_search"], key, {published})
        corpus.vectors_cold_start(str(venv / "bin" / "python"), source, run_env, "main", published)
    finally:
        for started_component in reversed(started):
            started_component.stop()


def create_key_gcp(project: str, firestore_host: str) -> str:
    """docs/deploy.md: `FANFUSE_PROJECT=$PROJECT fanfuse keys create --owner my-app --firestore`
    (against the emulator here)."""
    env = {"FANFUSE_PROJECT": project, "FIRESTORE_EMULATOR_HOST": firestore_host}
    return _create_key(["--firestore"], env)


def _create_key(store: list[str], store_env: Mapping[str, str]) -> str:
    """The operator's first key, made as docs/deploy.md says: `fanfuse keys create` from the
    operator's machine (this venv), against the deployment's store."""
    beside = Path(sys.executable).parent / "fanfuse"
    fanfuse = str(beside) if beside.exists() else shutil.which("fanfuse") or "fanfuse"
    command = ["keys", "create", "--owner", "my-app", *store]
    out = subprocess.run(
        [fanfuse, *command], env={**os.environ, **store_env}, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"rehearsal FAILED: fanfuse keys create:\n{out.stderr[-2000:]}")
    say(f"fanfuse {' '.join(command)}: key made")
    return out.stdout.strip().splitlines()[-1]


# -- AWS ------------------------------------------------------------------------------------------


def rehearse_aws(work: Path, var_files: list[Path]) -> None:
    """Terraform applies infra/aws to moto, and the search runs on what it created
    (aws_rehearsal.py)."""
    from fanfuse_deploy import aws_rehearsal

    aws_rehearsal.rehearse(work, var_files, sys.modules[__name__])


def create_key_aws(aws_env: Mapping[str, str]) -> str:
    """docs/deploy.md: `fanfuse keys create --owner my-app --dynamodb` with the table's settings
    (against moto here)."""
    return _create_key(["--dynamodb"], aws_env)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="scripts/deploy-rehearsal")
    parser.add_argument("cloud", choices=["gcp", "aws"])
    parser.add_argument("var_files", type=Path, nargs="*")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    var_files = args.var_files or [render.EXAMPLES / f"{args.cloud}.tfvars"]
    work = Path(tempfile.mkdtemp(prefix=f"fanfuse-rehearsal-{args.cloud}-"))
    started = time.monotonic()
    say(f"{args.cloud} in {work}")
    try:
        (rehearse_gcp if args.cloud == "gcp" else rehearse_aws)(work, var_files)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    say(f"{time.monotonic() - started:.0f} s")
    print("rehearsal ok", flush=True)


if __name__ == "__main__":
    main()
