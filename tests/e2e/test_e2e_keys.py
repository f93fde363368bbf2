"""`fanfuse keys` on the stacks' own stores: the Firestore emulator of the GCP stack and moto's
DynamoDB of the AWS stack (tests/support/keys_checks.py, also run on SQLite in tests/integration).
The key the command prints starts a search at that stack's start_search (its front verifying it as
deployed), and a revoked key is refused by a fresh authenticator on the same store."""

from __future__ import annotations

import os
from collections.abc import Callable
from unittest import mock

from fanfuse.auth.keys import API_KEY_HEADER
from fanfuse.runtimes.aws import dynamo_store
from fanfuse.settings import Settings
from fanfuse.store.firestore import FirestoreStore
from tests.support.e2e.aws import AwsCloud
from tests.support.e2e.cloud import Cloud, Runtime
from tests.support.keys_checks import keys_round_trip

REQUEST = {"query": "laser", "platform": "docs"}


def starts_a_search(runtime: Runtime) -> Callable[[str], bool]:
    def accepted(key: str) -> bool:
        return bool(runtime.start(REQUEST, headers={API_KEY_HEADER: key})["task_id"])

    return accepted


def test_keys_on_the_gcp_stacks_firestore(e2e: Cloud) -> None:
    env: dict[str, str | None] = {**e2e.addresses.env(), "FANFUSE_CLOUD": None}
    where = f"Firestore {e2e.addresses.project}/searches_keys"
    for flags in ([], ["--firestore"]):  # the emulator variable picks it, as the flag does
        keys_round_trip(
            env, flags, where, lambda: FirestoreStore(e2e.firestore_client()), starts_a_search(e2e)
        )


def test_keys_on_the_aws_stacks_dynamodb(e2e_aws: AwsCloud) -> None:
    env: dict[str, str | None] = {**e2e_aws.stack.env, "FIRESTORE_EMULATOR_HOST": None}
    with mock.patch.dict(os.environ, e2e_aws.stack.env):
        settings = Settings()
    where = (
        f"DynamoDB {settings.aws_region}/{settings.dynamodb_table} at {settings.aws_endpoint_url}"
    )
    keys_round_trip(env, [], where, lambda: dynamo_store(settings), starts_a_search(e2e_aws))
