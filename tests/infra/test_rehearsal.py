"""The deploy rehearsals CI runs (issues 20 and 30), each a process of its own, as docs/deploy.md
gives them (rehearsal.REHEARSALS):

- gcp: the Cloud Functions source built, installed into a clean environment, the functions
  started with Terraform's rendered environment on the emulators, a search through the API;
- aws, with infra/examples/aws.tfvars (the bundled corpus and a team's handbook as `docs` and
  `vectors` corpus platforms) and with aws-web.tfvars (the corpus and four web platforms, three
  keyed): Terraform applies infra/aws to moto's server, the rehearsal checks what it created,
  searches through the functions as created, plans again (nothing to change) and destroys it.
  With aws.tfvars it also publishes the handbook into the corpus bucket the apply created and
  finds its documents through both corpus platforms (issue 33), and measures a `vectors`
  worker's cold start from the installed zip.

The two AWS rehearsals run at once (each waits mostly on the AWS provider's propagation
delays). A missing prerequisite (the runtime's Python, gcloud, Java, terraform, the provider
mirror) fails, never skips.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fanfuse_deploy import rehearsal
from fanfuse_deploy import terraform as tf

ROOT = Path(__file__).resolve().parents[2]
GCP, AWS, AWS_WEB = rehearsal.REHEARSALS


def start(command: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHON": sys.executable}
    argv = shlex.split(command)
    return subprocess.Popen(
        [str(ROOT / argv[0]), *argv[1:]],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: a timeout ends the emulators it started
    )


def finish(process: subprocess.Popen[bytes], log: Path, timeout: float) -> str:
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the script and every process it started
        process.wait(10)
    output = log.read_text(errors="replace")
    lines = [line for line in output.splitlines() if line.startswith("rehearsal")]
    tail = "\n".join(lines[-60:]) + "\n" + output[-3000:]
    assert process.returncode == 0, tail
    assert lines[-1] == "rehearsal ok", tail
    return "\n".join(lines)


CORPUS_FOUND = (
    r"fanfuse index handbook/ --publish \S+://\S+/handbook: .* version ",
    r"corpus search: completed, first 'Expense reports' from handbook, handbook_vectors, "
    r"version \S+",
    r"vectors worker cold start: import [\d.]+ s, first search [\d.]+ s .*; torch not imported",
)
"""A published corpus found through deployed `docs` and `vectors` platforms (issue 33)."""


# The budgets below are hang guards, not performance claims: the GCP rehearsal took 624 s and
# both AWS ones 1,129 s on this 2-core machine at load 17-26 (2026-11-27), about half that quiet.
@pytest.mark.long(seconds=300)
@pytest.mark.timeout(960)
def test_the_gcp_rehearsal_passes(tmp_path: Path) -> None:
    log = tmp_path / "gcp.log"
    said = finish(start(GCP, log), log, 900)
    assert "no fanfuse/tools" in said  # the functions ran from a source without them
    for expected in CORPUS_FOUND:
        assert re.search(expected, said), (expected, said[-3000:])


@pytest.mark.long(seconds=600)
@pytest.mark.timeout(1860)
def test_terraform_applies_infra_aws_to_moto_searches_plans_nothing_and_destroys(
    tmp_path: Path,
) -> None:
    """Both AWS var files: apply, verify, search, an empty second plan, destroy."""
    started = time.monotonic()
    runs = {
        cmd: (start(cmd, tmp_path / f"{i}.log"), tmp_path / f"{i}.log")
        for i, cmd in enumerate((AWS, AWS_WEB))
    }
    for command, (process, log) in runs.items():
        remaining = max(60.0, 1800 - (time.monotonic() - started))
        said = finish(process, log, remaining)
        for expected in (
            r"applied: \d+ resources in \d+ s",
            r"verified: table fanfuse, \d+ queues each with its dead-letter queue",
            r"search_status: completed, \d+ results",
            r"second plan: no changes",
            r"destroyed \(\d+ s\)",
        ):
            assert re.search(expected, said), (command, expected, said[-3000:])
        if command == AWS:  # aws.tfvars: the corpus, in the bucket Terraform created
            assert re.search(r"s3://fanfuse-corpora-\d+/handbook", said), said[-3000:]
            for expected in CORPUS_FOUND:
                assert re.search(expected, said), (command, expected, said[-3000:])
        else:
            assert "nothing to publish" in said, said[-3000:]
        print(f"{command}: {re.search(r'figures: (.*)', said).group(1)}")  # type: ignore[union-attr]
    print(f"both AWS rehearsals: {time.monotonic() - started:.0f} s")


def test_a_machine_without_terraform_or_the_provider_mirror_fails_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The AWS rehearsal checks before building anything; the test above then fails with it."""
    with pytest.raises(tf.TerraformMissing, match="no hashicorp/aws provider"):
        tf.check_installed(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(tf.TerraformMissing, match="terraform is not installed"):
        tf.check_installed()
    monkeypatch.undo()
    binary, versions = tf.check_installed()  # CI's machine has both
    assert binary and versions


def test_the_override_points_every_service_infra_aws_uses_at_moto() -> None:
    """A resource of a service the override does not redirect would be created on AWS itself
    (with moto's stand-in credentials: refused, but attempted)."""
    services = {
        "apigatewayv2": "aws_apigatewayv2_", "budgets": "aws_budgets_", "cloudwatch":
        "aws_cloudwatch_metric_alarm", "dynamodb": "aws_dynamodb_", "iam": "aws_iam_",
        "kms": "aws_kms_", "lambda": "aws_lambda_", "logs": "aws_cloudwatch_log_",
        "s3": "aws_s3_", "secretsmanager": "aws_secretsmanager_", "sns": "aws_sns_",
        "sqs": "aws_sqs_", "sts": "aws_caller_identity",
    }  # fmt: skip
    text = "\n".join(p.read_text() for p in (ROOT / "infra" / "aws").glob("*.tf"))
    used = set(re.findall(r'^(?:resource|data) "(aws_\w+)"', text, re.M))
    for kind in used:
        if kind == "aws_iam_policy_document":
            continue  # rendered by the provider itself, no call
        assert any(kind.startswith(prefix) for prefix in services.values()), kind
    assert set(tf.ENDPOINTS) == set(services)
    override = tf.moto_override("http://127.0.0.1:1")
    for service in tf.ENDPOINTS:
        assert re.search(rf'{service}\s+= "http://127.0.0.1:1"', override), service
