"""The `tracing` Terraform variable turns a deployment's tracing on whole (issue 32, item 3):
the functions' environment (OpenTelemetry's own variables), the identity allowed to write the
traces, and the extra the artifact is built with so that what those variables name is installed.
Off (the default), none of it: no OTEL_* variable, no grant, no exporter shipped.

Read as Terraform evaluates it (scripts/fanfuse_deploy's evaluator, checked against Terraform
itself by test_hcl_against_terraform.py). The artifacts built with tracing on are installed and
imported in test_tracing_artifacts.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fanfuse_deploy import package, render
from fanfuse_deploy.hcl import Module, unquote

COLLECTOR = "arn:aws:lambda:us-east-1:901920570463:layer:aws-otel-collector-amd64-ver-0-102-1:1"
"""ADOT's collector layer, as its documentation names one per region and architecture."""
XRAY_WRITES = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]


def var_file(tmp_path: Path, cloud: str, text: str) -> list[Path]:
    path = tmp_path / f"{cloud}-tracing.tfvars"
    path.write_text(text)
    return [path]


def gcp_on(tmp_path: Path) -> list[Path]:
    return var_file(tmp_path, "gcp", "tracing = true\ntracing_sample_ratio = 0.25\n")


def aws_on(tmp_path: Path, xray_tracing: bool = False) -> list[Path]:
    text = f'tracing = true\ntracing_collector_layer_arn = "{COLLECTOR}"\n'
    if xray_tracing:
        text += "xray_tracing = true\n"
    return var_file(tmp_path, "aws", text)


def otel(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("OTEL_")}


def trace_writers(module: Module) -> dict[str, str]:
    """Function -> the member `roles/cloudtrace.agent` is granted to (tracing.tf), as written:
    a service account's email is known only after apply."""
    grant = module.resources("google_project_iam_member")["trace_writer"]
    assert module.value(grant["role"], {}) == "roles/cloudtrace.agent"
    return {name: unquote(grant["member"]) for name in module.value(grant["for_each"], {})}


def xray_statement(module: Module, function: str) -> list[dict[str, Any]]:
    """The function's policy statements that let it write to X-Ray (iam.tf, "Tracing")."""
    body = module.data("aws_iam_policy_document")["function"]
    (dynamic,) = [d for d in body["dynamic"] if "xray:" in json.dumps(d)]
    statement = dynamic['"statement"']
    found = []
    for sid in module.value(statement["for_each"], {"each": {"key": function}}):
        content = statement["content"][0]
        scope = {"statement": {"value": sid}}
        found.append(
            {
                "Sid": module.value(content["sid"], scope),
                "Action": module.value(content["actions"], scope),
                "Resource": module.value(content["resources"], scope),
            }
        )
    return found


def test_off_by_default_no_variable_no_grant_no_exporter_shipped() -> None:
    gcp = render.gcp_module([])
    assert gcp.variables["tracing"] is False
    for name, env in render.gcp_environments(gcp, {}).items():
        assert otel(env) == {}, name
    assert trace_writers(gcp) == {}
    assert package.deployed_extras("gcp", []) == package.extras_for("gcp", ["docs"])
    assert not [e for e in package.deployed_extras("gcp", []) if e.endswith("-trace")]

    aws = render.aws_module([])
    assert aws.variables["tracing"] is False
    for name, env in render.aws_environments(aws).items():
        assert otel(env) == {}, name
        assert xray_statement(aws, name) == []
    (function,) = aws.resources("aws_lambda_function").values()
    assert aws.value(function["layers"], {}) == []
    assert package.deployed_extras("aws", []) == package.extras_for("aws", ["docs"])
    assert not [e for e in package.deployed_extras("aws", []) if e.endswith("-trace")]


def test_on_google_cloud_each_function_exports_to_cloud_trace_as_its_own_identity(
    tmp_path: Path,
) -> None:
    files = gcp_on(tmp_path)
    module = render.gcp_module(files)
    envs = render.gcp_environments(module, {})
    for name, env in envs.items():
        assert otel(env) == {
            "OTEL_TRACES_EXPORTER": "gcp_trace",
            "OTEL_SERVICE_NAME": "fanfuse",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.25",
            "OTEL_PROPAGATORS": "tracecontext",
        }, name
    # Each function's own service account may write traces, and nothing else gets the role.
    writers = trace_writers(module)
    assert set(writers) == set(envs)
    own = "serviceAccount:${google_service_account.function[each.key].email}"
    assert set(writers.values()) == {own}
    functions = module.resources("google_cloudfunctions2_function")
    for name in envs:  # ... the identity each function runs as
        account = functions[name]["service_config"][0]["service_account_email"]
        assert f'google_service_account.function["{name}"].email' in account, (name, account)
    api = module.resources("google_project_service")["cloudtrace"]
    assert module.value(api["service"], {}) == "cloudtrace.googleapis.com"
    assert module.value(api["count"], {}) == 1
    # The artifact holds the exporter that OTEL_TRACES_EXPORTER=gcp_trace names.
    assert package.deployed_extras("gcp", files) == [
        *package.deployed_extras("gcp", []),
        "gcp-trace",
    ]


def test_on_aws_each_lambda_sends_otlp_to_the_collector_layer_which_may_write_to_xray(
    tmp_path: Path,
) -> None:
    files = aws_on(tmp_path)
    module = render.aws_module(files)
    assert module.variables["xray_tracing"] is False  # tracing alone grants the writes
    for name, env in render.aws_environments(module).items():
        assert otel(env) == {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://localhost:4318/v1/traces",
            "OTEL_SERVICE_NAME": module.variables["name_prefix"],
            "OTEL_PROPAGATORS": "xray,tracecontext",
            "OTEL_PYTHON_ID_GENERATOR": "xray",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "1",
        }, name
        # The collector runs with the function's role: it needs X-Ray's writes, nothing more.
        assert xray_statement(module, name) == [
            {"Sid": "Tracing", "Action": XRAY_WRITES, "Resource": ["*"]}
        ], name
    (function,) = module.resources("aws_lambda_function").values()
    assert module.value(function["layers"], {}) == [COLLECTOR]
    assert module.value(function["tracing_config"][0]["mode"], {}) == "PassThrough"
    # The zip holds the OTLP exporter, X-Ray's id generator and its propagator.
    assert package.deployed_extras("aws", files) == [
        *package.deployed_extras("aws", []),
        "aws-trace",
    ]
    # Lambda's own X-Ray tracing grants the same writes, once.
    both = render.aws_module(aws_on(tmp_path, xray_tracing=True))
    assert len(xray_statement(both, "worker")) == 1


def test_the_tracing_extras_exist_and_bring_what_the_variables_name() -> None:
    """pyproject's extras: each brings the SDK and the exporter its cloud's variables name
    (gcp-trace: Cloud Trace's; aws-trace: OTLP/HTTP, X-Ray's ids and propagator, and no gRPC,
    which no Lambda uses)."""
    import tomllib

    extras = tomllib.loads((render.ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]

    def brings(extra: str) -> str:
        """The extra's requirements, a `fanfuse[...]` one expanded."""
        found = []
        for requirement in extras[extra]:
            if requirement.startswith("fanfuse["):
                found += [brings(e) for e in requirement[8:-1].split(",")]
            else:
                found.append(requirement)
        return " ".join(found)

    assert package.TRACING_EXTRAS == {"gcp": "gcp-trace", "aws": "aws-trace"}
    for needed in ("opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"):
        assert needed in brings("gcp-trace") and needed in brings("aws-trace")
    assert "opentelemetry-exporter-gcp-trace" in brings("gcp-trace")
    assert "opentelemetry-instrumentation-grpc" in brings("gcp-trace")  # Firestore, Cloud Tasks
    aws = brings("aws-trace")
    assert "opentelemetry-propagator-aws-xray" in aws and "opentelemetry-sdk-extension-aws" in aws
    assert "opentelemetry-instrumentation-botocore" in aws  # DynamoDB, SQS
    assert "grpc" not in aws
