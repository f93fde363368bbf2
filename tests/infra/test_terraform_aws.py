"""infra/aws is wired as the code expects: parsed with python-hcl2, no provider needed.

What a plan would not catch: the table's layout is the store's, every handler named exists, the
queues feed the handlers one message at a time with partial batch responses, every function runs
the AWS ports and signs and checks its messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fanfuse.store import dynamodb_codec as codec
from tests.infra.test_terraform import INFRA, _load

AWS = _load(INFRA / "aws")
LAMBDA_ENTRY = Path(__file__).resolve().parents[2] / "functions" / "aws_lambda.py"


def resources(kind: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for block in AWS["resource"]:
        found.update(block.get(kind, {}))
    return found


def local(name: str) -> Any:
    return next(block[name] for block in AWS["locals"] if name in block)


def test_the_table_is_the_stores() -> None:
    (table,) = resources("aws_dynamodb_table").values()
    assert (table["hash_key"], table["range_key"]) == ("pk", "sk")
    assert table["ttl"] == [{"attribute_name": codec.TTL_ATTRIBUTE, "enabled": True}]
    (index,) = table["global_secondary_index"]
    assert index["name"] == codec.OWNER_INDEX
    # An optional cost, off by default; deletion protection lifted only to tear down.
    assert table["point_in_time_recovery"] == [{"enabled": "${var.point_in_time_recovery}"}]
    assert variable("point_in_time_recovery")["default"] is False
    assert table["deletion_protection_enabled"] == "${var.deletion_protection}"
    assert variable("deletion_protection")["default"] is True
    assert table["server_side_encryption"][0]["enabled"] is True


def test_every_handler_named_exists_in_the_lambda_entry_module() -> None:
    names = {f["handler"] for f in local("functions").values()}
    assert names == {"aws_lambda.http", "aws_lambda.worker", "aws_lambda.aggregator"}
    source = LAMBDA_ENTRY.read_text()
    for name in names:
        assert f"\n{name.split('.')[1]} = front." in source, name


@pytest.mark.parametrize("mapping", ["platforms", "aggregate"])
def test_queues_feed_one_message_at_a_time_with_partial_batch_responses(mapping: str) -> None:
    esm = resources("aws_lambda_event_source_mapping")[mapping]
    assert esm["batch_size"] == 1
    assert esm["function_response_types"] == ["ReportBatchItemFailures"]
    handler = "worker" if mapping == "platforms" else "aggregator"
    assert esm["function_name"] == f'${{aws_lambda_function.fanfuse["{handler}"].arn}}'


def test_every_queue_has_a_dead_letter_queue_and_is_encrypted() -> None:
    queues = resources("aws_sqs_queue")
    assert "deadLetterTargetArn" in queues["tasks"]["redrive_policy"]
    for queue in queues.values():
        assert queue["kms_master_key_id"] == "${aws_kms_key.fanfuse.arn}"


def test_functions_run_the_aws_ports_and_sign_their_messages() -> None:
    """The task secret is drawn by Secrets Manager once and kept (no random provider: the
    machine's mirror has the AWS provider only)."""
    # Rendered (common_env merges corpus.tf's settings in): every function, as deployed, its
    # secret Secrets Manager's (the stand-in render gives aws_secretsmanager_secret_version).
    from fanfuse_deploy import render

    environments = render.aws_environments(render.aws_module([], tasks_secret="the-secret"))
    for name, env in environments.items():
        assert env["FANFUSE_CLOUD"] == "aws", name
        assert env["FANFUSE_TASKS_HMAC_SECRET"] == "the-secret", name
    version = resources("aws_secretsmanager_secret_version")["tasks"]
    assert version["lifecycle"] == [{"ignore_changes": ["secret_string"]}]
    assert [set(p) for p in AWS["terraform"][0]["required_providers"]] == [{"aws"}]
    (function,) = resources("aws_lambda_function").values()
    assert function["environment"] == [
        {
            "variables": "${merge(local.common_env, local.tracing_env, "
            'each.key == "http" ? local.caller_env : {}, '
            'each.key == "worker" ? local.worker_env : {})}'
        }
    ]


def variable(name: str) -> dict[str, Any]:
    return next(block[name] for block in AWS["variable"] if name in block)


def test_the_http_routes_require_iam_unless_the_api_is_public_and_trust_follows() -> None:
    """The principal in the event is believed exactly when API Gateway verified it: every
    route AWS_IAM. `public` routes have no authorization and the function trusts no identity
    but what it verifies itself."""
    (routes,) = resources("aws_apigatewayv2_route").values()
    assert routes["authorization_type"] == '${var.api_access == "iam" ? "AWS_IAM" : "NONE"}'
    assert local("caller_env")["FANFUSE_TRUST_IAM_AUTHORIZER"] == (
        '${tostring(var.api_access == "iam")}'
    )
    assert variable("api_access")["default"] == "iam"
    assert variable("id_token_principals")["default"] == []
    assert variable("firebase_allow_anonymous")["default"] is False
    assert variable("firebase_project")["default"] is None


def test_the_local_dispatcher_invokes_as_many_at_once_per_queue_as_the_mappings() -> None:
    """`fanfuse dev --cloud aws` (fronts/aws_lambda/local.py) polls each platform queue with the
    platform mappings' maximum concurrency; the aggregate mapping sets none, so Lambda starts
    it at five concurrent invocations, under the aggregator's reserved concurrency."""
    from fanfuse.fronts.aws_lambda.local import AGGREGATE_POLLERS, PLATFORM_POLLERS

    mappings = resources("aws_lambda_event_source_mapping")
    scaling = mappings["platforms"]["scaling_config"]
    assert scaling == [{"maximum_concurrency": "${var.platform_concurrency}"}]
    assert variable("platform_concurrency")["default"] == PLATFORM_POLLERS
    aggregate = mappings["aggregate"]["scaling_config"]
    assert aggregate == [{"maximum_concurrency": "${var.aggregate_concurrency}"}]
    assert variable("aggregate_concurrency")["default"] == AGGREGATE_POLLERS
