"""The artifacts a deployment with `tracing = true` ships, built by the deploy's own script and
installed as each cloud installs them, hold what the Terraform-rendered OpenTelemetry variables
name (issue 32, item 3), stay within the clouds' limits, and cost nothing at import when those
variables are absent.

- AWS: the Lambda zip (the `aws-trace` extra), unzipped and put on a bare interpreter's path as
  /var/task is; the entry module imported with the rendered environment of a function (the
  collector's localhost:4318 replaced by a receiver on 127.0.0.1, tools/otlp.py): its spans
  arrive there with X-Ray's trace ids, and the X-Ray header is propagated beside traceparent.
- Google Cloud: the function source (the `gcp-trace` extra) installed into a clean venv from its
  requirements.txt, as Cloud Functions' build does; the entry module imported with a function's
  rendered environment (`OTEL_TRACES_EXPORTER=gcp_trace`) turns tracing on with Cloud Trace's
  exporter, its credentials from a service-account key file as Application Default Credentials
  would give them (no span is exported: Cloud Trace cannot be reached from here).

Both need the runtime's Python (3.12, as the rehearsals do) and PyPI, and fail without them.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from fanfuse_deploy import limits, package, rehearsal, render

from fanfuse.tools.devstack.aws_stack import AWS_DUMMY_ENV
from fanfuse.tools.otlp import OtlpReceiver
from tests.infra.test_tracing_infra import aws_on, gcp_on

PROBE = """
import json, os, sys
import {entry}  # its import configures tracing (fanfuse/tracing/setup.py)
from fanfuse.tracing import setup, spans
otel = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
found = {{"on": spans.enabled(), "otel": otel}}
if found["on"] and os.environ.get("PROBE_SPAN"):
    from opentelemetry import propagate, trace
    with trace.get_tracer("probe").start_as_current_span("probe span") as span:
        carrier = {{}}
        propagate.inject(carrier)
        found["trace_id"] = format(span.get_span_context().trace_id, "032x")
    found["carrier"] = carrier
    setup.flush()
if found["on"] and os.environ.get("PROBE_EXPORTERS"):
    found["exporters"] = [type(e).__name__ for e in setup._exporters(os.environ)]
print("PROBE " + json.dumps(found))
"""


def probe(python: str, entry: str, cwd: Path, env: Mapping[str, str]) -> dict[str, object]:
    """Import `entry` in a fresh interpreter of the runtime with `env` only; what it found."""
    out = subprocess.run(
        [python, "-c", PROBE.format(entry=entry)],
        cwd=cwd,
        env=rehearsal.clean_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("PROBE ")]
    found: dict[str, object] = json.loads(line.removeprefix("PROBE "))
    return found


def without_otel(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("OTEL_")}


@pytest.fixture(scope="module")
def python() -> str:
    return rehearsal.find_python("3.12")


@pytest.fixture(scope="module")
def lambda_tree(tmp_path_factory: pytest.TempPathFactory, python: str) -> Iterator[Path]:
    work = tmp_path_factory.mktemp("lambda")
    files = aws_on(work)
    assert package.runtime_python("aws", files) == "3.12"
    archive = work / "lambda.zip"
    sizes = package.package_aws(archive, package.deployed_extras("aws", files), "3.12")
    assert limits.check_lambda(sizes) == []  # 250 MB unzipped (package_aws refuses it too)
    print(f"Lambda zip with aws-trace: {sizes}")
    tree = rehearsal.unzip(archive, work / "task")
    assert (tree / "opentelemetry" / "sdk").is_dir()
    assert not (tree / "grpc").exists()  # no Lambda makes a gRPC call: not shipped
    yield tree


def test_the_lambda_zip_with_tracing_on_exports_xray_ids_over_otlp(
    tmp_path: Path, python: str, lambda_tree: Path
) -> None:
    module = render.aws_module(aws_on(tmp_path))
    env = render.aws_environments(module)["worker"]
    base = {
        **env,
        **AWS_DUMMY_ENV,
        "AWS_DEFAULT_REGION": "us-east-1",
        "FANFUSE_AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # never called: nothing is stored
        "PYTHONPATH": str(lambda_tree),
    }
    # Off: the SDK is in the zip, and not one OpenTelemetry module is imported.
    off = probe(python, "aws_lambda", lambda_tree, without_otel(base))
    assert off == {"on": False, "otel": []}

    with OtlpReceiver() as receiver:
        assert env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == "http://localhost:4318/v1/traces"
        on_env = {**base, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint}
        on = probe(python, "aws_lambda", lambda_tree, {**on_env, "PROBE_SPAN": "1"})
        trace_id = str(on["trace_id"])
        spans = receiver.wait_for(lambda got: any(s.trace_id == trace_id for s in got))
    assert on["on"] is True
    (span,) = [s for s in spans if s.trace_id == trace_id]
    assert span.name == "probe span" and span.service == module.variables["name_prefix"]
    # X-Ray's trace id: its first 32 bits are the epoch second it began.
    assert abs(int(trace_id[:8], 16) - time.time()) < 600
    carrier = on["carrier"]
    assert isinstance(carrier, dict)
    assert carrier["X-Amzn-Trace-Id"].startswith(f"Root=1-{trace_id[:8]}-{trace_id[8:]};")
    assert carrier["traceparent"].split("-")[1] == trace_id


@pytest.fixture(scope="module")
def gcp_source(tmp_path_factory: pytest.TempPathFactory, python: str) -> tuple[Path, Path]:
    """(the function source, the venv it is installed into)."""
    work = tmp_path_factory.mktemp("gcf")
    files = gcp_on(work)
    archive = work / "function.zip"
    sizes = package.package_gcp(archive, package.deployed_extras("gcp", files))
    source = rehearsal.unzip(archive, work / "function")
    requirements = (source / "requirements.txt").read_text()
    assert requirements.strip().endswith(",gcp-trace]"), requirements
    venv = work / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
         "-r", "requirements.txt"],
        cwd=source, check=True, env=rehearsal.clean_env({"PIP_CACHE_DIR": rehearsal.pip_cache()}),
    )  # fmt: skip
    (site,) = venv.glob("lib/python*/site-packages")
    installed = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    assert limits.check_gcf(sizes, installed) == []  # 100 MB zipped, 500 MB with its modules
    print(f"Cloud Functions source with gcp-trace: {sizes}, {installed / 1e6:.0f} MB installed")
    return source, venv


def service_account_key(path: Path, project: str) -> Path:
    """A key file as `gcloud iam service-accounts keys create` writes one (a fresh RSA key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": project,
                "private_key_id": "0" * 40,
                "private_key": pem,
                "client_email": f"fanfuse-run-platform@{project}.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": "http://127.0.0.1:9/token",  # never asked: nothing is exported
            }
        )
    )
    return path


def test_the_function_source_with_tracing_on_exports_to_cloud_trace(
    tmp_path: Path, python: str, gcp_source: tuple[Path, Path]
) -> None:
    source, venv = gcp_source
    module = render.gcp_module(gcp_on(tmp_path))
    env = render.gcp_environments(module, {})["run_platform"]
    assert env["OTEL_TRACES_EXPORTER"] == "gcp_trace"
    interpreter = str(venv / "bin" / "python")
    off = probe(interpreter, "main", source, without_otel(env))
    assert off == {"on": False, "otel": []}
    key = service_account_key(tmp_path / "key.json", "demo-fanfuse")
    on = probe(
        interpreter,
        "main",
        source,
        {**env, "GOOGLE_APPLICATION_CREDENTIALS": str(key), "PROBE_EXPORTERS": "1"},
    )
    assert on["on"] is True
    assert on["exporters"] == ["CloudTraceSpanExporter"]
