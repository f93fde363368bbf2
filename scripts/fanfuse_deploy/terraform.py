"""Terraform itself, run on this machine against moto's server: the rehearsal's apply.

`Workspace` copies a root module (infra/aws) to a work directory, so nothing the run writes
(`.terraform/`, the lock file, the override, plans) lands in infra/, and adds one file the real
deploy never has: `moto_override.tf`, pointing the AWS provider's every endpoint at 127.0.0.1 with
moto's stand-in credentials. Terraform is configured by a CLI config file of its own
(TF_CLI_CONFIG_FILE) whose only provider source is the machine's filesystem mirror (no registry is
reachable from here). The state lives in an S3 bucket on moto, through the same `backend "s3"` and
`-backend-config` flags docs/deploy.md gives (only the endpoint flags are the rehearsal's).

Missing terraform or a mirror without hashicorp/aws is an error naming what is missing
(`TerraformMissing`): the tests fail on it, never skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MIRROR = Path(os.environ.get("FANFUSE_TF_PLUGIN_MIRROR", "/opt/tf-plugins"))
AWS_PROVIDER = "registry.terraform.io/hashicorp/aws"
MOTO_CREDENTIALS = {"access_key": "testing", "secret_key": "testing"}
ENDPOINTS = (
    "apigatewayv2", "budgets", "cloudwatch", "dynamodb", "iam", "kms", "lambda", "logs", "s3",
    "secretsmanager", "sns", "sqs", "sts",
)  # fmt: skip
"""Every AWS service infra/aws uses (tests/infra check that each resource's service is listed)."""


class TerraformMissing(RuntimeError):
    """terraform, or the AWS provider in the local mirror, is not on this machine."""


class TerraformFailed(RuntimeError):
    """A terraform command exited non-zero (its output's tail is the message)."""


def check_installed(mirror: Path = MIRROR) -> tuple[str, list[str]]:
    """terraform's path and the AWS provider versions in `mirror`, or TerraformMissing."""
    binary = shutil.which("terraform")
    if binary is None:
        raise TerraformMissing("terraform is not installed (1.10 or later; docs/deploy.md)")
    provider = mirror / AWS_PROVIDER
    versions = sorted(
        p.name for p in provider.glob("*") if any(p.glob("*/terraform-provider-aws*"))
    )
    if not versions:
        raise TerraformMissing(f"no hashicorp/aws provider in the filesystem mirror {mirror}")
    return binary, versions


def cli_config(mirror: Path) -> str:
    """Providers from the filesystem mirror only: never the registry."""
    return (
        "provider_installation {\n"
        f'  filesystem_mirror {{\n    path    = "{mirror}"\n'
        '    include = ["registry.terraform.io/hashicorp/*"]\n  }\n'
        '  direct {\n    exclude = ["registry.terraform.io/*/*"]\n  }\n}\n'
    )


def moto_override(endpoint: str) -> str:
    """The provider aimed at moto: every endpoint, stand-in credentials, no account lookups."""
    lines = [f'    {name:<14} = "{endpoint}"' for name in ENDPOINTS]
    return (
        "# Written by the rehearsal in its own copy of the module; never part of infra/.\n"
        'provider "aws" {\n'
        f'  access_key                  = "{MOTO_CREDENTIALS["access_key"]}"\n'
        f'  secret_key                  = "{MOTO_CREDENTIALS["secret_key"]}"\n'
        "  skip_credentials_validation = true\n"
        "  skip_metadata_api_check     = true\n"
        "  skip_requesting_account_id  = true\n"
        "  s3_use_path_style           = true\n"
        "  endpoints {\n" + "\n".join(lines) + "\n  }\n}\n"
    )


def backend_endpoint_flags(endpoint: str) -> list[str]:
    """What only the rehearsal adds to docs/deploy.md's `terraform init`: moto as S3 and STS."""
    return [
        f'-backend-config=endpoints={{s3="{endpoint}",sts="{endpoint}"}}',
        "-backend-config=use_path_style=true",
        "-backend-config=skip_credentials_validation=true",
        "-backend-config=skip_requesting_account_id=true",
        "-backend-config=skip_metadata_api_check=true",
        "-backend-config=skip_s3_checksum=true",
        f"-backend-config=access_key={MOTO_CREDENTIALS['access_key']}",
        f"-backend-config=secret_key={MOTO_CREDENTIALS['secret_key']}",
    ]


@dataclass
class Run:
    """One terraform command: its arguments, exit code, seconds and output."""

    args: list[str]
    code: int
    seconds: float
    output: str


@dataclass
class Workspace:
    """A copy of `module` wired to moto at `endpoint`, with its own CLI config."""

    module: Path
    work: Path
    endpoint: str
    mirror: Path = MIRROR
    timeout_s: float = 600.0
    runs: list[Run] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.binary, _ = check_installed(self.mirror)
        self.dir = self.work / self.module.name
        shutil.copytree(
            self.module, self.dir, ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*")
        )
        (self.dir / "moto_override.tf").write_text(moto_override(self.endpoint))
        self.config = self.work / "terraform.rc"
        self.config.write_text(cli_config(self.mirror))

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "AWS_"))}
        return {
            **keep,
            "TF_CLI_CONFIG_FILE": str(self.config),
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
            "CHECKPOINT_DISABLE": "1",  # no version check over the network
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_ACCESS_KEY_ID": MOTO_CREDENTIALS["access_key"],
            "AWS_SECRET_ACCESS_KEY": MOTO_CREDENTIALS["secret_key"],
        }

    def run(self, args: Sequence[str], ok: Sequence[int] = (0,)) -> Run:
        started = time.monotonic()
        done = subprocess.run(
            [self.binary, *args], cwd=self.dir, env=self.env(), capture_output=True, text=True,
            timeout=self.timeout_s,
        )  # fmt: skip
        run = Run(
            list(args), done.returncode, time.monotonic() - started, done.stdout + done.stderr
        )
        self.runs.append(run)
        if done.returncode not in ok:
            raise TerraformFailed(
                f"terraform {' '.join(args)} exited {done.returncode}:\n{run.output[-6000:]}"
            )
        return run

    def init(self, backend_flags: Sequence[str]) -> Run:
        return self.run(
            [
                "init",
                "-input=false",
                "-no-color",
                *backend_flags,
                *backend_endpoint_flags(self.endpoint),
            ]
        )

    def plan_changes(self, var_args: Sequence[str]) -> tuple[bool, Run]:
        """`plan -detailed-exitcode`: whether anything would change (exit 2), and the run."""
        run = self.run(
            ["plan", "-input=false", "-no-color", "-detailed-exitcode", *var_args], ok=(0, 2)
        )
        return run.code == 2, run

    def state_resources(self) -> list[str]:
        """The managed resources in the state (data sources left out)."""
        listed = self.run(["state", "list"]).output.split()
        return [
            address
            for address in listed
            if not address.startswith("data.") and ".data." not in address
        ]

    def outputs(self) -> dict[str, object]:
        raw = json.loads(self.run(["output", "-json"]).output)
        return {name: value["value"] for name, value in raw.items()}


def plan_summary(output: str) -> str:
    """`Plan: 1 to add, 0 to change, 0 to destroy.` and each resource that would change."""
    lines = [m.group(0) for m in re.finditer(r"^\s*# \S.* (will|must) be .*$", output, re.M)]
    summary = re.search(r"^Plan: .*$", output, re.M)
    return "\n".join([*lines, summary.group(0) if summary else ""]).strip()


def var_args(var_files: Sequence[Path], variables: Mapping[str, str]) -> list[str]:
    return [f"-var-file={path}" for path in var_files] + [
        f"-var={k}={v}" for k, v in variables.items()
    ]
