"""`fanfuse keys` on the Lambdas' DynamoDB table (moto's server on 127.0.0.1): chosen by
FANFUSE_CLOUD=aws as the functions choose it, or by `--dynamodb`, and refused alongside another
store's flag."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fanfuse.cli.keys import which_store
from fanfuse.cli.main import app
from fanfuse.runtimes.aws import dynamo_store
from fanfuse.settings import Settings
from tests.support.keys_checks import keys_round_trip


def aws_env(settings: Settings, cloud: str) -> dict[str, str | None]:
    return {
        "FANFUSE_CLOUD": cloud,
        "FANFUSE_AWS_ENDPOINT_URL": settings.aws_endpoint_url,
        "FANFUSE_DYNAMODB_TABLE": settings.dynamodb_table,
        "FANFUSE_AWS_REGION": settings.aws_region,
        "FIRESTORE_EMULATOR_HOST": None,
    }


@pytest.mark.parametrize(("cloud", "flags"), [("aws", []), ("gcp", ["--dynamodb"])])
def test_keys_on_dynamodb(aws_settings: Settings, cloud: str, flags: list[str]) -> None:
    where = f"DynamoDB us-east-1/{aws_settings.dynamodb_table} at {aws_settings.aws_endpoint_url}"
    keys_round_trip(aws_env(aws_settings, cloud), flags, where, lambda: dynamo_store(aws_settings))


@pytest.mark.parametrize(
    ("firestore", "dynamodb", "cloud", "emulator", "kind"),
    [
        (None, False, "gcp", False, "sqlite"),
        (None, False, "gcp", True, "firestore"),
        (None, False, "aws", True, "dynamodb"),  # the runtime's store wins over an emulator
        (True, False, "aws", False, "firestore"),
        (False, False, "aws", False, "sqlite"),
        (None, True, "gcp", True, "dynamodb"),
    ],
)
def test_the_store_is_the_named_one_else_the_runtimes(
    firestore: bool | None, dynamodb: bool, cloud: str, emulator: bool, kind: str
) -> None:
    assert which_store(firestore, dynamodb, cloud, emulator) == kind


def test_two_stores_named_is_one_error() -> None:
    result = CliRunner().invoke(app, ["keys", "list", "--dynamodb", "--sqlite"])
    assert result.exit_code == 2
    assert "give one store: --dynamodb, --firestore or --sqlite" in result.output
