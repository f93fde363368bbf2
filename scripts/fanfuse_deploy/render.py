"""The environment Terraform gives each function, rendered from infra/ (defaults + var files).

`gcp_environments` and `aws_environments` return, per function, exactly the variables the
deployed function would see (secrets included, by name, with the value the caller supplies), with
the values known only after apply (URLs, identities, generated secrets) taken from `stand_ins`:
the rehearsal passes its local addresses, the contract tests recognisable placeholders.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fanfuse_deploy.hcl import HclError, Module, unquote

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
AWS_INFRA = INFRA / "aws"
EXAMPLES = INFRA / "examples"
GCP_FUNCTIONS = ("start_search", "search_status", "cancel_search", "run_platform", "aggregate")
AWS_FUNCTIONS = ("http", "worker", "aggregator")
ACCOUNT_STAND_IN = "123456789012"
"""The account id a rendering gives `data.aws_caller_identity` (moto's default account too)."""


class Resolver:
    """Values known after apply: a stand-in by reference prefix, else the resource's own
    attribute as written in infra/ (a table's `name`), else a loud failure."""

    def __init__(self, stand_ins: Mapping[str, Any]) -> None:
        self.stand_ins = dict(stand_ins)
        self.module: Module | None = None

    def __call__(self, text: str) -> Any:
        for prefix, value in self.stand_ins.items():
            if text == prefix:
                return value
        assert self.module is not None
        kind, _, rest = text.partition(".")
        name, _, attribute = rest.partition(".")
        body = self.module.resources(kind).get(name)
        if body is not None and attribute in body:
            return self.module.value(body[attribute], {})
        raise HclError(f"{text}: no stand-in for a value known only after apply")


def load(
    directory: Path,
    var_files: list[Path],
    overrides: Mapping[str, Any],
    stand_ins: Mapping[str, Any],
) -> Module:
    resolver = Resolver(stand_ins)
    module = Module.load(directory, var_files, overrides, resolver)
    resolver.module = module
    missing = module.missing_variables()
    if missing:
        raise HclError(f"{directory}: required variables not given: {', '.join(missing)}")
    return module


def gcp_stand_ins(
    project: str, urls: Mapping[str, str], secrets: Mapping[str, str]
) -> dict[str, Any]:
    found: dict[str, Any] = {
        "google_service_account.tasks.email": f"fanfuse-tasks@{project}.iam.gserviceaccount.com",
        "google_firestore_database.main[0].name": "(default)",
        "data.google_secret_manager_secret.provider": {
            env: {"secret_id": secret} for env, secret in secrets.items()
        },
    }
    for target, url in urls.items():
        found[f"google_cloudfunctions2_function.{target}.service_config[0].uri"] = url
    return found


def gcp_environments(module: Module, secret_values: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Per function: `environment_variables`, plus the secrets it mounts (by env name)."""
    found: dict[str, dict[str, str]] = {}
    functions = module.resources("google_cloudfunctions2_function")
    for target in GCP_FUNCTIONS:
        service = functions[target]["service_config"][0]
        env = dict(module.value(service.get("environment_variables", {}), {}))
        for dynamic in service.get("dynamic", []):
            for kind, body in dynamic.items():
                if unquote(kind) != "secret_environment_variables":
                    continue
                collection = module.value(body["for_each"], {})
                for env_name in collection:
                    if env_name not in secret_values:
                        raise HclError(f"{target} mounts secret {env_name}: no value given")
                    env[env_name] = secret_values[env_name]
        found[target] = {k: str(v) for k, v in env.items()}
    return found


def aws_stand_ins(
    api_endpoint: str, tasks_secret: str, secret_values: Mapping[str, str], module_secrets: Any
) -> dict[str, Any]:
    return {
        "data.aws_caller_identity.current.account_id": ACCOUNT_STAND_IN,
        "aws_apigatewayv2_api.http.api_endpoint": api_endpoint,
        "aws_secretsmanager_secret_version.tasks.secret_string": tasks_secret,
        "data.aws_secretsmanager_secret_version.provider": {
            env: {"secret_string": secret_values[env]} for env in module_secrets
        },
    }


def aws_environments(module: Module) -> dict[str, dict[str, str]]:
    lambdas = module.resources("aws_lambda_function")["fanfuse"]
    environment = lambdas["environment"][0]["variables"]
    return {
        name: {k: str(v) for k, v in module.value(environment, {"each": {"key": name}}).items()}
        for name in AWS_FUNCTIONS
    }


def union(environments: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """One environment holding every function's variables (the local host of the three Lambda
    handlers); a name two functions are given different values of is an error."""
    merged: dict[str, str] = {}
    for name, env in environments.items():
        for key, value in env.items():
            if merged.setdefault(key, value) != value:
                raise HclError(f"{name} gets {key}={value!r}, another function {merged[key]!r}")
    return merged


def gcp_module(
    var_files: list[Path],
    urls: Mapping[str, str] | None = None,
    secret_ids: Mapping[str, str] | None = None,
    project: str = "demo-fanfuse",
) -> Module:
    """infra/ with the cloudbuild flags (project, region, source object) and `var_files`."""
    urls = urls or {t: f"https://{t.replace('_', '-')}.run.app.invalid" for t in GCP_FUNCTIONS}
    probe = Module.load(INFRA, var_files, {"project_id": project, "function_source_object": "x"})
    secrets = secret_ids if secret_ids is not None else probe.local("secrets")
    return load(
        INFRA,
        var_files,
        {"project_id": project, "function_source_object": "fanfuse-rehearsal.zip"},
        gcp_stand_ins(project, urls, secrets),
    )


def aws_module(
    var_files: list[Path],
    api_endpoint: str = "https://api.execute-api.invalid",
    tasks_secret: str = "tasks-secret-stand-in",
    secret_values: Mapping[str, str] | None = None,
    lambda_s3_key: str = "lambda/fanfuse-rehearsal.zip",
) -> Module:
    probe = Module.load(AWS_INFRA, var_files, {"lambda_s3_key": lambda_s3_key})
    declared = probe.variables.get("provider_secrets", {})
    values = secret_values or {env: f"stand-in-{env.lower()}" for env in declared}
    return load(
        AWS_INFRA,
        var_files,
        {"lambda_s3_key": lambda_s3_key},
        aws_stand_ins(api_endpoint, tasks_secret, values, declared),
    )


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def policy_document(module: Module, name: str) -> dict[str, Any]:
    """`data "aws_iam_policy_document" name` as the JSON policy it renders (the statements,
    their principals and conditions; dynamic statements left out)."""
    body = module.data("aws_iam_policy_document")[name]
    statements = []
    for raw in body.get("statement", []):
        statement = module.value(raw, {})
        rendered: dict[str, Any] = {
            "Effect": statement.get("effect", "Allow"),
            "Action": _listed(statement.get("actions", [])),
            "Resource": _listed(statement.get("resources", [])),
        }
        for principal in statement.get("principals", []):
            rendered.setdefault("Principal", {})[principal["type"]] = _listed(
                principal["identifiers"]
            )
        for condition in statement.get("condition", []):
            tests = rendered.setdefault("Condition", {}).setdefault(condition["test"], {})
            tests[condition["variable"]] = _listed(condition["values"])
        statements.append(rendered)
    return {"Version": "2012-10-17", "Statement": statements}


def aws_encrypted_log_groups(module: Module) -> dict[str, str]:
    """Every `aws_cloudwatch_log_group` with a `kms_key_id`, by address: its name as rendered."""
    found: dict[str, str] = {}
    for name, body in module.resources("aws_cloudwatch_log_group").items():
        if "kms_key_id" not in body:
            continue
        if "for_each" in body:
            for key in module.value(body["for_each"], {}):
                scope = {"each": {"key": key, "value": key}}
                found[f'aws_cloudwatch_log_group.{name}["{key}"]'] = module.value(
                    body["name"], scope
                )
        else:
            found[f"aws_cloudwatch_log_group.{name}"] = module.value(body["name"], {})
    return found
