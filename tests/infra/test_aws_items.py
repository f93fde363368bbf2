"""infra/aws, issue 30's items, on the configuration as Terraform evaluates it (scripts/
fanfuse_deploy's evaluator, the rehearsal's): each test below fails on the defect it names. The
apply on moto (test_rehearsal.py) checks what was created against the same rules.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fanfuse_deploy import aws_rehearsal, render
from fanfuse_deploy.hcl import Module

from fanfuse.store import recent

EXAMPLES = render.EXAMPLES
ACCOUNT = render.ACCOUNT_STAND_IN


def aws(tmp_path: Path | None = None, text: str = "", *var_files: Path) -> Module:
    files = list(var_files)
    if text:
        assert tmp_path is not None
        chosen = tmp_path / "chosen.tfvars"
        chosen.write_text(text)
        files.append(chosen)
    return render.aws_module(files)


def outside_key_policy(module: Module) -> list[str]:
    """Encrypted log groups whose ARN the key's policy does not let CloudWatch Logs use it for."""
    policy = render.policy_document(module, "kms")
    region = str(module.variables["region"])
    prefix = f"arn:aws:logs:{region}:{ACCOUNT}:log-group:"
    return [
        address
        for address, name in render.aws_encrypted_log_groups(module).items()
        if not aws_rehearsal.log_group_allowed(policy, prefix + name, region)
    ]


# -- Item 3: a KMS-encrypted log group outside the key policy -----------------------------------


@pytest.mark.parametrize("case", ["defaults", "aws.tfvars", "aws-web.tfvars"])
def test_every_encrypted_log_group_is_one_the_key_policy_lets_cloudwatch_logs_use(
    case: str,
) -> None:
    files = [] if case == "defaults" else [EXAMPLES / case]
    module = render.aws_module(files)
    groups = render.aws_encrypted_log_groups(module)
    assert "aws_cloudwatch_log_group.api" in groups  # the API's access logs are encrypted too
    assert outside_key_policy(module) == []


def test_the_log_group_check_fails_on_the_old_key_policy() -> None:
    """The key policy before the fix (Lambda's groups only) refused the API's log group."""
    module = render.aws_module([])
    policy = render.policy_document(module, "kms")
    (logs,) = [s for s in policy["Statement"] if "logs.us-east-1.amazonaws.com" in json.dumps(s)]
    logs["Condition"] = {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": [
        f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/aws/lambda/fanfuse-*"]}}  # fmt: skip
    prefix = f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:"
    allowed = {
        name: aws_rehearsal.log_group_allowed(policy, prefix + name, "us-east-1")
        for name in render.aws_encrypted_log_groups(module).values()
    }
    assert allowed == {
        "/aws/apigateway/fanfuse-api": False,
        "/aws/lambda/fanfuse-http": True,
        "/aws/lambda/fanfuse-worker": True,
        "/aws/lambda/fanfuse-aggregator": True,
    }


# -- Item 4: reserved concurrency off by default; pollers within the worker's concurrency -------


def test_reserved_concurrency_is_off_by_default() -> None:
    module = render.aws_module([])
    assert module.variables["reserved_concurrency"] == {}
    (function,) = module.resources("aws_lambda_function").values()
    assert (
        function["reserved_concurrent_executions"]
        == "${lookup(var.reserved_concurrency, each.key, -1)}"
    )
    for name in render.AWS_FUNCTIONS:
        assert (
            module.value(function["reserved_concurrent_executions"], {"each": {"key": name}}) == -1
        )


def plan_fails(module: Module) -> list[str]:
    """The error messages of the mappings' preconditions that fail, as the plan reports them."""
    mapping = module.resources("aws_lambda_event_source_mapping")["platforms"]
    failed = []
    for precondition in mapping["lifecycle"][0]["precondition"]:
        if not module.value(precondition["condition"], {}):
            failed.append(module.value(precondition["error_message"], {}))
    return failed


FOURTEEN = json.dumps([
    "docs", "google", "weixin", "perplexity", "builtin", "tavily", "brave", "searxng", "linkup",
    "exa", "sec_edgar", "arxiv", "wikipedia", "web_search_mcp",
])  # fmt: skip


@pytest.mark.parametrize(
    ("text", "fails"),
    [
        ("", False),
        (f"platforms = {FOURTEEN}\n", False),  # 70 pollers in the account's 1000
        (f"platforms = {FOURTEEN}\nreserved_concurrency = {{ worker = 50 }}\n", True),  # 70 > 50
        (
            f"platforms = {FOURTEEN}\nplatform_concurrency = 3\n"
            "reserved_concurrency = { worker = 50 }\n",
            False,
        ),
        (
            'platforms = ["docs", "wikipedia", "tavily"]\naccount_concurrency = 10\n',
            True,
        ),  # new account
        (
            'platforms = ["docs", "wikipedia"]\nplatform_concurrency = 2\n'
            "account_concurrency = 10\n",
            False,
        ),
        (
            "reserved_concurrency = { http = 50, worker = 50, aggregator = 50 }\n"
            "account_concurrency = 200\n",
            True,
        ),
    ],
)
def test_a_plan_whose_pollers_exceed_the_functions_concurrency_fails(
    tmp_path: Path, text: str, fails: bool
) -> None:
    failed = plan_fails(aws(tmp_path, text))
    assert bool(failed) is fails, failed


def test_the_failing_plan_says_why() -> None:
    module = render.aws_module([EXAMPLES / "aws-web.tfvars"])
    assert plan_fails(module) == []
    assert module.local("pollers") == {"worker": 12, "aggregator": 5}


# -- Item 5: operator stats scan the table: the http role may ----------------------------------


def test_the_http_role_may_scan_the_table_for_operator_stats() -> None:
    """store/recent.py reads everyone's recent searches with a Scan (an operator's stats)."""
    assert 'get_paginator("scan")' in Path(recent.__file__).read_text()
    module = render.aws_module([])
    body = module.data("aws_iam_policy_document")["function"]
    (dynamic,) = [d for d in body["dynamic"] if "OperatorStats" in json.dumps(d)]
    statement = dynamic['"statement"']
    for name, expected in {"http": ["OperatorStats"], "worker": [], "aggregator": []}.items():
        assert module.value(statement["for_each"], {"each": {"key": name}}) == expected
    assert module.value(statement["content"][0]["actions"], {}) == ["dynamodb:Scan"]
    assert statement["content"][0]["resources"] == ["${aws_dynamodb_table.fanfuse.arn}"]


# -- Item 6: CORS on AWS -----------------------------------------------------------------------


def test_cors_origins_reach_the_gateway_and_the_function(tmp_path: Path) -> None:
    module = aws(tmp_path, 'cors_origins = ["https://app.example.com"]\napi_access = "public"\n')
    (api,) = module.resources("aws_apigatewayv2_api").values()
    (dynamic,) = api["dynamic"]
    cors = dynamic['"cors_configuration"']
    assert module.value(cors["for_each"], {}) == [["https://app.example.com"]]
    content = cors["content"][0]
    assert {"x-api-key", "authorization", "content-type"} <= set(
        module.value(content["allow_headers"], {})
    )
    http = render.aws_environments(module)["http"]
    assert json.loads(http["FANFUSE_CORS_ORIGINS"]) == ["https://app.example.com"]
    assert (
        module.value(cors["for_each"], {})
        and render.aws_module([]).value(cors["for_each"], {}) == []
    )


# -- Item 11: optional costs as variables, off by default ---------------------------------------


def test_optional_costs_are_variables_off_by_default() -> None:
    variables = render.aws_module([]).variables
    assert variables["point_in_time_recovery"] is False
    assert variables["xray_tracing"] is False
    assert variables["log_retention_days"] <= 30
    module = render.aws_module([])
    (function,) = module.resources("aws_lambda_function").values()
    assert module.value(function["tracing_config"][0]["mode"], {}) == "PassThrough"


# -- Item 12: alerts as code, each to the notification channel -----------------------------------


def test_alarms_watch_the_dead_letter_queues_errors_latency_and_spend(tmp_path: Path) -> None:
    module = render.aws_module([EXAMPLES / "aws-web.tfvars"])
    alarms = module.resources("aws_cloudwatch_metric_alarm")
    assert set(alarms) == {"dead_letters", "function_errors", "search_latency", "daily_spend"}
    for name, alarm in alarms.items():
        assert alarm["alarm_actions"] == ["${aws_sns_topic.alerts.arn}"], name
    assert alarms["dead_letters"]["for_each"] == "${aws_sqs_queue.dead_letter}"
    assert module.value(alarms["search_latency"]["extended_statistic"], {}) == "p95"
    assert alarms["daily_spend"]["period"] == 86400
    topic = module.resources("aws_sns_topic")["alerts"]
    assert topic["kms_master_key_id"] == "${aws_kms_key.fanfuse.arn}"
    emails = module.resources("aws_sns_topic_subscription")["alert_emails"]
    assert module.value(emails["for_each"], {}) == ["ops@example.com"]
    budget = module.resources("aws_budgets_budget")["monthly"]
    assert module.value(budget["count"], {}) == 0  # optional
    budgeted = aws(tmp_path, "monthly_budget_usd = 200\n", EXAMPLES / "aws-web.tfvars")
    assert budgeted.value(budget["count"], {}) == 1
    notices = {
        (n["threshold"], module.value(n["notification_type"], {})) for n in budget["notification"]
    }
    assert notices == {(80, "ACTUAL"), (100, "FORECASTED")}
    for notice in budget["notification"]:
        assert notice["subscriber_sns_topic_arns"] == ["${aws_sns_topic.alerts.arn}"]


def event_line(fields: dict[str, Any]) -> dict[str, Any]:
    """An event line as the functions write it (support/logs.py's formatter)."""
    import logging

    from fanfuse.support.logs import EVENT_FIELD, CloudLoggingFormatter

    record = logging.LogRecord("fanfuse.events", logging.INFO, __file__, 1, "x", None, None)
    setattr(record, EVENT_FIELD, fields)
    parsed: dict[str, Any] = json.loads(CloudLoggingFormatter("p").format(record))
    return parsed


def matches(pattern: str, line: dict[str, Any]) -> bool:
    """CloudWatch Logs' JSON filter pattern, the `{ ($.a = "x") && ($.b >= 0) }` part it uses."""
    import re

    terms = re.findall(r'\(\$\.(\w+) (=|>=) ("[^"]*"|[\d.]+)\)', pattern)
    assert terms and pattern.count("&&") == len(terms) - 1, pattern
    for field, op, value in terms:
        if field not in line:
            return False
        if op == "=" and line[field] != json.loads(value):
            return False
        if op == ">=" and not (
            isinstance(line[field], int | float) and line[field] >= float(value)
        ):
            return False
    return True


def test_the_metric_filters_read_the_event_lines_the_service_writes() -> None:
    """The spend and latency figures come from service/events.py's lines: a renamed field would
    leave the alarms on an empty metric."""
    from datetime import timedelta

    from fanfuse.service import events
    from fanfuse.wire.models import SearchRequest, Task, utcnow

    module = render.aws_module([])
    filters = module.local("event_filters")
    now = utcnow()
    request = SearchRequest.model_validate({"query": ["q"], "platform": ["docs"]})
    task = Task(
        task_id="t", request=request, queries=request.queries, platforms=["docs"], fusion="rrf",
        deadline_at=now + timedelta(seconds=30), expires_at=now + timedelta(minutes=5),
        created_at=now, finalized_at=now + timedelta(seconds=7.5),
    )  # fmt: skip
    search = event_line(events.search_fields(task))
    assert search["duration_s"] == 7.5
    assert matches(filters["search_seconds"]["pattern"], search)
    assert filters["search_seconds"]["value"] == "$.duration_s"
    run = event_line({"event": "platform_run", "platform": "docs", "cost_usd": 0.002})
    assert matches(filters["spend_usd"]["pattern"], run)
    assert not matches(filters["spend_usd"]["pattern"], search)
    assert filters["spend_usd"]["value"] == "$.cost_usd"
