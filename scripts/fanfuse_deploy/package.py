"""The artifacts a deployment ships, built one way for the build and for the rehearsal.

    python -m fanfuse_deploy.package gcp OUT.zip [VAR_FILE...]
    python -m fanfuse_deploy.package aws OUT.zip [VAR_FILE...]

gcp: the Cloud Functions source: main.py at the root, the fanfuse wheel under wheels/, and a
requirements.txt installing that wheel with the extras the deployed platforms need (Cloud
Functions' build runs `pip install -r requirements.txt` for the runtime). aws: the Lambda zip:
aws_lambda.py at the root beside every dependency, installed for the Lambda runtime's Python
and platform (manylinux x86_64 wheels only, as Lambda would load them). The deployed platforms
are read from infra/ and the var files, the same Terraform inputs the deploy uses, so the
package cannot miss a deployed platform's extra.

Both ship the fanfuse wheel without `fanfuse.tools` (bench, evaluation, the local stacks, the
provider stubs: development only, DEVELOPMENT_ONLY), and both are refused, nothing written,
when over their cloud's limits (limits.py). The Lambda zip's name carries its content's hash,
the key it is uploaded under (docs/deploy.md): a new build never overwrites a previous one.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from fanfuse_deploy.hcl import Module
from fanfuse_deploy.limits import Sizes, check_gcf, check_lambda, refuse
from fanfuse_deploy.render import AWS_INFRA, INFRA, ROOT

BASE_EXTRAS = {"gcp": ["cloud", "web"], "aws": ["lambda", "web"]}
"""What every function imports on each cloud (the store, the queue, the front; page content)."""
PLATFORM_EXTRAS = {"docs": "docs", "vectors": "vectors", "web_search_mcp": "web-search-mcp"}
"""Platforms that need more than the core: their extra, installed only where they are deployed."""
CORPUS_ENGINES = frozenset({"docs", "vectors"})
"""Engines whose hits carry their documents' text (a local or published corpus): a deployment of
only these fetches no page, so it needs no `web` extra (stages/pipeline.py imports it on first
use only)."""
LAMBDA_UNUSED = ("onnxruntime/capi/libonnxruntime.so*", "hf_xet", "hf_xet-*.dist-info")
"""What no Lambda process loads, left out of the zip (Lambda's limit is 250 MB unzipped):
onnxruntime's C API library (35 MB; its Python binding is self-contained) and hf_xet (12 MB,
Hugging Face hub transfers: the model ships inside fanfuse and tokenizers reads it from a file).
The rehearsal runs a `vectors` search from the zip, so a release that needs them fails there."""
LAMBDA_PLATFORM = "manylinux2014_x86_64"
LAMBDA_AL2023_PLATFORM = "manylinux_2_28_x86_64"
"""Wheels built for glibc 2.28 load on the python3.12+ runtimes (Amazon Linux 2023, glibc 2.34);
onnxruntime (the `vectors` extra) ships no manylinux2014 wheel any more. Older runtimes (Amazon
Linux 2, glibc 2.26) take manylinux2014 only."""
DEVELOPMENT_ONLY = ("fanfuse/tools/",)
"""Parts of the fanfuse package no function imports (DESIGN.md: development only), left out of
every artifact: the functions must import and run without them (the rehearsal runs them)."""


def variables(cloud: str, var_files: list[Path]) -> dict[str, Any]:
    """The root module's variables (the deploy's required flags given stand-in values)."""
    if cloud == "gcp":
        required = {"project_id": "p", "function_source_object": "x"}
        return Module.load(INFRA, var_files, required).variables
    return Module.load(AWS_INFRA, var_files, {"lambda_s3_key": "x"}).variables


def deployed_platforms(cloud: str, var_files: list[Path]) -> list[str]:
    return sorted(variables(cloud, var_files)["platforms"])


def deployed_engines(cloud: str, var_files: list[Path]) -> list[str]:
    """The engines the deployed platforms run: a corpus platform (corpus.tf) runs its engine's
    code (`handbook_vectors` is `vectors`), so it needs that engine's extra."""
    corpora = variables(cloud, var_files).get("corpus_platforms") or {}
    engines = {name: str(spec["engine"]) for name, spec in corpora.items()}
    return sorted({engines.get(p, p) for p in deployed_platforms(cloud, var_files)})


def extras_for(cloud: str, platforms: list[str]) -> list[str]:
    extra = [PLATFORM_EXTRAS[p] for p in platforms if p in PLATFORM_EXTRAS]
    base = BASE_EXTRAS[cloud]
    if platforms and set(platforms) <= CORPUS_ENGINES:
        base = [name for name in base if name != "web"]
    return list(dict.fromkeys([*base, *extra]))


def runtime_python(cloud: str, var_files: list[Path]) -> str:
    """`3.12` from the runtime Terraform deploys (python312 / python3.12)."""
    runtime = str(variables(cloud, var_files)["python_runtime"])
    match = re.fullmatch(r"python3\.?(\d+)", runtime)
    if match is None:
        raise ValueError(f"unknown runtime {runtime!r}")
    return f"3.{match.group(1)}"


def build_wheel(into: Path) -> Path:
    """The fanfuse wheel as the functions install it: DEVELOPMENT_ONLY left out."""
    into.mkdir(parents=True, exist_ok=True)
    # setuptools builds in the source tree (build/, the egg-info): one build at a time, or two
    # packagings at once (the rehearsals CI runs together) trip over each other's files.
    lock = (Path(tempfile.gettempdir()) / "fanfuse-wheel-build.lock").open("w")
    with lock, tempfile.TemporaryDirectory() as tmp:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
             "-w", tmp, str(ROOT)],
            check=True,
        )  # fmt: skip
        (built,) = Path(tmp).glob("fanfuse-*.whl")
        wheel = into / built.name
        without_development_tools(built, wheel)
    return wheel


def without_development_tools(wheel: Path, out: Path) -> None:
    """`wheel` rewritten to `out` without the DEVELOPMENT_ONLY files, its RECORD (the list pip
    installs and checks) without their lines."""
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dest:
        for info in source.infolist():
            if info.filename.startswith(DEVELOPMENT_ONLY):
                continue
            data = source.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                kept = [
                    line for line in data.decode().splitlines(keepends=True)
                    if not line.startswith(DEVELOPMENT_ONLY)
                ]  # fmt: skip
                data = "".join(kept).encode()
            dest.writestr(info, data)


def development_files(archive: Path) -> list[str]:
    """Entries of a built artifact (or of a wheel inside it) that are development only."""
    found: list[str] = []
    with zipfile.ZipFile(archive) as handle:
        for name in handle.namelist():
            if name.startswith(DEVELOPMENT_ONLY):
                found.append(name)
            elif name.endswith(".whl"):
                with tempfile.TemporaryDirectory() as tmp:
                    inner = Path(handle.extract(name, tmp))
                    found += [f"{name}!{n}" for n in development_files(inner)]
    return found


def lambda_s3_key(archive: Path) -> str:
    """The key a Lambda zip is uploaded under: its content's hash, so each build has its own and
    the previous ones stay for a rollback."""
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()[:16]
    return f"lambda/fanfuse-{digest}.zip"


def _zip(directory: Path, out: Path) -> None:
    """A zip of `directory`'s tree, entries in sorted order (the same tree, the same zip)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(directory).as_posix())


def _write_checked(tree: Path, out: Path, check: Any, what: str) -> Sizes:
    """Zip `tree` beside `out`, and move it to `out` only if `check` finds nothing refused."""
    staged = out.with_name(out.name + ".partial")
    _zip(tree, staged)
    sizes = Sizes.of(staged)
    try:
        refuse(check(sizes), f"{out} ({what})")
    except Exception:
        staged.unlink()
        raise
    staged.replace(out)
    return sizes


def package_gcp(out: Path, extras: list[str]) -> Sizes:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "function"
        wheel = build_wheel(tree / "wheels")
        shutil.copy(ROOT / "functions" / "main.py", tree / "main.py")
        (tree / "requirements.txt").write_text(f"./wheels/{wheel.name}[{','.join(extras)}]\n")
        return _write_checked(tree, out, check_gcf, "Cloud Functions source")


def lambda_platforms(python: str) -> list[str]:
    """pip's `--platform` flags for the wheels a Lambda runtime of `python` (3.X) can load."""
    platforms = [LAMBDA_PLATFORM]
    if int(python.split(".")[1]) >= 12:
        platforms.append(LAMBDA_AL2023_PLATFORM)
    return [flag for platform in platforms for flag in ("--platform", platform)]


def package_aws(out: Path, extras: list[str], python: str) -> Sizes:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "lambda"
        wheel = build_wheel(Path(tmp) / "wheels")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
             "--target", str(tree), *lambda_platforms(python), "--implementation", "cp",
             "--python-version", python, "--only-binary=:all:",
             f"{wheel}[{','.join(extras)}]"],
            check=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        )  # fmt: skip
        shutil.copy(ROOT / "functions" / "aws_lambda.py", tree / "aws_lambda.py")
        for cache in tree.rglob("__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)
        for pattern in LAMBDA_UNUSED:
            for unused in tree.glob(pattern):
                if unused.is_dir():
                    shutil.rmtree(unused)
                else:
                    unused.unlink()
        return _write_checked(tree, out, check_lambda, "Lambda .zip package, through S3")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="scripts/package-functions")
    parser.add_argument("cloud", choices=["gcp", "aws"])
    parser.add_argument("out", type=Path)
    parser.add_argument("var_files", type=Path, nargs="*")
    args = parser.parse_args(argv)
    platforms = deployed_platforms(args.cloud, args.var_files)
    extras = extras_for(args.cloud, deployed_engines(args.cloud, args.var_files))
    if args.cloud == "gcp":
        sizes = package_gcp(args.out, extras)
    else:
        sizes = package_aws(args.out, extras, runtime_python(args.cloud, args.var_files))
    print(f"{args.out}: {args.cloud}, platforms {','.join(platforms)}, extras {','.join(extras)};"
          f" {sizes}")  # fmt: skip
    if args.cloud == "aws":
        print(f"upload to s3://<artifact_bucket>/{lambda_s3_key(args.out)}")


if __name__ == "__main__":
    main()
