"""The Terraform in infra/ is wired as the design says: parsed with python-hcl2, no provider needed.

These checks are about the wiring that a plan would not catch as an error: which identity runs
what, who may invoke the task targets, which function each queue delivers to, the TTL policy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hcl2
import pytest

from fanfuse.settings import Settings

INFRA = Path(__file__).resolve().parents[2] / "infra"
FUNCTIONS = {"start_search", "search_status", "cancel_search", "run_platform", "aggregate"}
TASK_TARGETS = {"run_platform", "aggregate"}
PUBLIC = FUNCTIONS - TASK_TARGETS
INVOKER_ROLES = {"roles/run.invoker", "roles/cloudfunctions.invoker"}
PLATFORMS = {
    "docs", "vectors", "google", "weixin", "perplexity", "builtin", "tavily", "brave", "searxng",
    "linkup", "exa", "sec_edgar", "arxiv", "wikipedia", "web_search_mcp",
}  # fmt: skip
FUNCTION_REF = re.compile(r"google_cloudfunctions2_function\.(\w+)")


def _clean(value: Any) -> Any:
    """python-hcl2 output without its quoting and block markers: `"\\"x\\""` becomes `x`."""
    if isinstance(value, dict):
        return {
            _unquote(k): _clean(v)
            for k, v in value.items()
            if k not in ("__is_block__", "__comments__")
        }
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, str):
        return _unquote(value)
    return value


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    return text


def _load(directory: Path = INFRA) -> dict[str, list[dict[str, Any]]]:
    """Every block of the `.tf` files of `directory` (infra/aws has its own test)."""
    merged: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(directory.glob("*.tf")):
        with path.open() as handle:
            parsed = _clean(hcl2.load(handle))
        for kind, blocks in parsed.items():
            merged.setdefault(kind, []).extend(blocks)
    return merged


TF = _load()
TF_LOCALS: dict[str, Any] = {k: v for block in TF.get("locals", []) for k, v in block.items()}


def resources(kind: str) -> dict[str, dict[str, Any]]:
    """name -> body of every resource of one type."""
    found: dict[str, dict[str, Any]] = {}
    for block in TF.get("resource", []):
        for name, body in block.get(kind, {}).items():
            found[name] = body
    return found


def all_resources() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for block in TF.get("resource", []):
        for kind, named in block.items():
            for name, body in named.items():
                yield kind, name, body


def one(blocks: Any) -> dict[str, Any]:
    """The single nested block (hcl2 gives every block as a list)."""
    assert isinstance(blocks, list) and len(blocks) == 1, blocks
    result: dict[str, Any] = blocks[0]
    return result


def variable_default(name: str) -> Any:
    for block in TF["variable"]:
        if name in block:
            return block[name]["default"]
    raise KeyError(name)


def test_the_five_functions_exist_with_their_entry_points() -> None:
    functions = resources("google_cloudfunctions2_function")
    assert set(functions) == FUNCTIONS
    for name, body in functions.items():
        assert one(body["build_config"])["entry_point"] == name
        assert body["name"] == "fanfuse-" + name.replace("_", "-")


def test_every_function_runs_as_its_own_service_account() -> None:
    functions = resources("google_cloudfunctions2_function")
    assert resources("google_service_account")["function"]["for_each"] == "${local.functions}"
    seen = set()
    for name, body in functions.items():
        email = one(body["service_config"]).get("service_account_email")
        assert email == f'${{google_service_account.function["{name}"].email}}', (name, email)
        seen.add(email)
    assert len(seen) == len(FUNCTIONS)
    assert set(re.findall(r'"(\w+)"', TF_LOCALS["functions"].replace('\\"', '"'))) == FUNCTIONS


def test_every_reference_to_a_function_names_an_existing_one() -> None:
    existing = set(resources("google_cloudfunctions2_function"))
    text = json.dumps(TF)
    referenced = set(FUNCTION_REF.findall(text))
    assert referenced, "nothing references a function: the parser output changed?"
    assert referenced <= existing, referenced - existing


def test_function_urls_env_points_each_name_at_that_function() -> None:
    for name, body in resources("google_cloudfunctions2_function").items():
        env = str(one(body["service_config"]).get("environment_variables", ""))
        match = re.search(r"FANFUSE_FUNCTION_URLS\s*=\s*jsonencode\(\{(.*?)\}\)", env, re.S)
        if match is None:
            continue
        for key, target in re.findall(
            r"(\w+)\s*=\s*google_cloudfunctions2_function\.(\w+)\.", match.group(1)
        ):
            assert key == target, (name, key, target)
            assert target != name


def test_every_queue_delivers_to_an_existing_task_target_as_the_tasks_account() -> None:
    queues = resources("google_cloud_tasks_queue")
    assert set(queues) == {"platform", "aggregate"}
    expected_target = {"platform": "run_platform", "aggregate": "aggregate"}
    for name, body in queues.items():
        target = one(body["http_target"])
        override = one(target["uri_override"])
        oidc = one(target["oidc_token"])
        host_refs = FUNCTION_REF.findall(override["host"])
        audience_refs = FUNCTION_REF.findall(oidc["audience"])
        assert host_refs == audience_refs == [expected_target[name]], name
        assert override["uri_override_enforce_mode"] == "ALWAYS"
        assert override["scheme"] == "HTTPS"
        assert oidc["service_account_email"] == "${google_service_account.tasks.email}"
        assert one(body["retry_config"])["max_attempts"]
        assert one(body["rate_limits"])["max_dispatches_per_second"]


def test_one_queue_per_platform_with_the_provider_quotas() -> None:
    # The default deploys only what needs no configuration; the providers' quotas are in the
    # reference example (tests/infra/test_contract.py renders both).
    assert set(variable_default("platforms")) == {"docs"}
    with (INFRA / "examples" / "gcp-providers.tfvars").open() as handle:
        platforms = _clean(hcl2.load(handle))["platforms"]
    assert set(platforms) == PLATFORMS - {"vectors"}
    assert platforms["sec_edgar"]["rate"] == 10
    assert platforms["arxiv"]["rate"] <= 1 / 3 + 0.01
    assert platforms["arxiv"]["concurrency"] == 1
    assert all(p["rate"] > 0 and p["max_attempts"] >= 1 for p in platforms.values())
    queue = resources("google_cloud_tasks_queue")
    assert queue["platform"]["for_each"] == "${var.platforms}"
    assert queue["aggregate"]["name"] == "fanfuse-aggregate"
    # Same naming as the application: fanfuse-{platform with _ replaced by -}.
    assert 'fanfuse-${replace(platform, "_", "-")}' in TF_LOCALS["queue_ids"].replace('\\"', '"')


def _iam_members() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for kind, name, body in all_resources():
        if kind.endswith(("_iam_member", "_iam_binding", "_iam_policy")):
            yield kind, name, body


def test_only_the_tasks_account_may_invoke_the_task_targets() -> None:
    invoker_roles = INVOKER_ROLES
    grants: dict[str, list[str]] = {t: [] for t in TASK_TARGETS}
    for kind, name, body in _iam_members():
        assert kind.endswith("_iam_member"), (
            f"{kind}.{name}: bindings/policies would be authoritative"
        )
        text = json.dumps(body)
        targets = set(FUNCTION_REF.findall(text)) & TASK_TARGETS
        if not targets or body.get("role") not in invoker_roles:
            continue
        assert "for_each" not in body, f"{kind}.{name}"
        for target in targets:
            grants[target].append(body["member"])
    assert grants == {
        "run_platform": ["${google_service_account.tasks.member}"],
        "aggregate": ["${google_service_account.tasks.member}"],
    }
    # The API invokers are granted only on the three API functions.
    api = resources("google_cloud_run_v2_service_iam_member")["api_invokers"]
    services = TF_LOCALS["api_services"]
    assert set(services) == {"start_search", "search_status", "cancel_search"}
    assert "local.api_services" in api["name"]


def test_nobody_is_public_and_no_role_is_basic() -> None:
    """allUsers only as api_access = "public" asks, on the three API functions (which then
    authenticate every request themselves), never on a task target."""
    public = resources("google_cloud_run_v2_service_iam_member")["api_public"]
    assert public["for_each"] == '${var.api_access == "public" ? local.api_services : {}}'
    assert public["member"] == "allUsers"
    assert variable_default("api_access") == "iam"
    text = json.dumps({k: v for k, v in TF.items()}).replace(json.dumps(public), "")
    assert "allUsers" not in text and "allAuthenticatedUsers" not in text
    for _, name, body in _iam_members():
        assert body.get("role") not in {"roles/owner", "roles/editor", "roles/viewer"}, name


def test_secrets_are_readable_by_run_platform_only() -> None:
    readers = [
        body
        for _, _, body in _iam_members()
        if body.get("role") == "roles/secretmanager.secretAccessor"
    ]
    assert readers, "no secret accessor grant at all"
    for body in readers:
        assert body["member"] == '${google_service_account.function["run_platform"].member}'
        assert "secret_id" in body  # per secret, never project-wide
    run_platform = resources("google_cloudfunctions2_function")["run_platform"]
    assert "secret_environment_variables" in json.dumps(run_platform)
    for name, body in resources("google_cloudfunctions2_function").items():
        if name != "run_platform":
            assert "secret_environment_variables" not in json.dumps(body), name


def test_enqueuers_and_firestore_roles_are_least_privilege() -> None:
    enqueue_grants = [
        (kind, body)
        for kind, _, body in _iam_members()
        if body.get("role") == "roles/cloudtasks.enqueuer"
    ]
    assert enqueue_grants
    # Per queue, never project-wide; only the two functions that enqueue.
    assert {kind for kind, _ in enqueue_grants} == {"google_cloud_tasks_queue_iam_member"}
    members = " ".join(
        str(body["member"]) + str(body.get("for_each", "")) for _, body in enqueue_grants
    )
    assert "start_search" in members and "run_platform" in members
    for other in ("search_status", "cancel_search", '"aggregate"'):
        assert other not in members, other
    viewer = resources("google_project_iam_member")["firestore_viewer"]
    assert viewer["role"] == "roles/datastore.viewer" and "search_status" in viewer["member"]
    user = resources("google_project_iam_member")["firestore_user"]
    assert user["role"] == "roles/datastore.user"
    assert "search_status" not in user["for_each"]


def test_ttl_policy_on_expires_at_for_searches_and_their_subcollections() -> None:
    ttl = resources("google_firestore_field")["ttl"]
    assert ttl["field"] == "expires_at"
    assert "ttl_config" in ttl
    for collection in ("searches", "platforms", "contents", "searches_cache", "searches_quota"):
        assert f'"{collection}"' in ttl["for_each"].replace('\\"', '"'), collection
    database = resources("google_firestore_database")["main"]
    assert database["type"] == "FIRESTORE_NATIVE"
    assert database["name"] == "(default)"


def test_indexes_json_matches_the_terraform() -> None:
    spec = json.loads((INFRA / "firestore.indexes.json").read_text())
    tf_indexes = resources("google_firestore_index")
    assert len(spec["indexes"]) == len(tf_indexes)
    for index in spec["indexes"]:
        fields = [(f["fieldPath"], f["order"]) for f in index["fields"]]
        matches = [
            body
            for body in tf_indexes.values()
            if body["collection"] == index["collectionGroup"]
            and [(f["field_path"], f["order"]) for f in body["fields"]] == fields
        ]
        assert matches, index
    ttl_groups = {o["collectionGroup"] for o in spec["fieldOverrides"] if o.get("ttl")}
    assert ttl_groups == {"searches", "platforms", "contents", "searches_cache", "searches_quota"}
    unindexed = resources("google_firestore_field")["unindexed"]["for_each"]
    for override in spec["fieldOverrides"]:
        assert override["indexes"] == []
        if not override.get("ttl"):
            key = f'"{override["collectionGroup"]}/{override["fieldPath"]}"'
            assert key in json.dumps(unindexed).replace('\\"', '"'), key


@pytest.mark.parametrize("path", sorted(p.name for p in INFRA.glob("*.tf")))
def test_every_tf_file_parses(path: str) -> None:
    with (INFRA / path).open() as handle:
        assert hcl2.load(handle)


# -- Who may call the HTTP API, and what the functions are told about it --------------------------


ENV_NAME = re.compile(r"\b(FANFUSE_[A-Z0-9_]+)\s*=")
ENV_LOCALS = ("common_env", "caller_env", "quota_env", "status_url_env")


def function_env(name: str) -> str:
    """A function's `environment_variables` expression, as written."""
    body = resources("google_cloudfunctions2_function")[name]
    return str(one(body["service_config"]).get("environment_variables", ""))


def test_the_public_functions_are_told_how_to_verify_callers_and_the_task_targets_are_not() -> None:
    caller_env = TF_LOCALS["caller_env"]
    assert caller_env["FANFUSE_AUTH_REQUIRED"] == "true"  # never anonymous in a deployment
    assert caller_env["FANFUSE_TRUST_GATEWAY"] == "${tostring(local.trust_gateway)}"
    assert TF_LOCALS["trust_gateway"] == "${var.gateway_service_account != null}"
    firebase = caller_env["FANFUSE_FIREBASE_PROJECT"]
    assert firebase == "${var.firebase_project == null ? var.project_id : var.firebase_project}"
    assert caller_env["FANFUSE_ID_TOKEN_AUDIENCES"] == "${jsonencode(var.id_token_audiences)}"
    assert variable_default("id_token_audiences") == []
    # Who among the token holders may call: nobody's Google token, no anonymous user, by default.
    assert caller_env["FANFUSE_ID_TOKEN_PRINCIPALS"] == "${jsonencode(var.id_token_principals)}"
    providers = caller_env["FANFUSE_FIREBASE_SIGN_IN_PROVIDERS"]
    assert providers == "${jsonencode(var.firebase_sign_in_providers)}"
    anonymous = caller_env["FANFUSE_FIREBASE_ALLOW_ANONYMOUS"]
    assert anonymous == "${tostring(var.firebase_allow_anonymous)}"
    assert variable_default("id_token_principals") == Settings().id_token_principals == []
    assert variable_default("firebase_sign_in_providers") is None
    assert variable_default("firebase_allow_anonymous") is Settings().firebase_allow_anonymous
    assert Settings().firebase_allow_anonymous is False
    assert variable_default("gateway_service_account") is None
    assert caller_env["FANFUSE_CORS_ORIGINS"] == "${jsonencode(var.cors_origins)}"
    assert variable_default("cors_origins") == Settings().cors_origins == []  # no CORS by default
    for name in FUNCTIONS:
        assert ("local.caller_env" in function_env(name)) == (name in PUBLIC), name


def test_the_gateway_is_trusted_only_when_it_is_the_one_invoker_of_the_api() -> None:
    """FANFUSE_TRUST_GATEWAY makes the functions believe a header anyone could set, so it is on
    only when IAM lets nothing but the gateway through: its service account then replaces the
    other invokers, and a plan with both fails its precondition."""
    members = TF_LOCALS["api_invoker_members"]
    assert members == (
        '${local.trust_gateway ? ["serviceAccount:${var.gateway_service_account}"]'
        " : var.api_invokers}"
    )
    api = resources("google_cloud_run_v2_service_iam_member")["api_invokers"]
    assert "local.api_invoker_members" in api["for_each"]
    assert "var.api_invokers" not in api["for_each"]
    start = resources("google_cloudfunctions2_function")["start_search"]
    conditions = [p["condition"] for p in one(start["lifecycle"])["precondition"]]
    assert conditions == [
        "${var.gateway_service_account == null || length(var.api_invokers) == 0}",
        '${var.gateway_service_account == null || var.api_access == "iam"}',
        "${length(var.id_token_audiences) == 0 || length(var.id_token_principals) > 0}",
    ]
    # No other grant lets anyone invoke an API function; ingress is open, IAM is the gate.
    for kind, name, body in _iam_members():
        text = json.dumps(body)
        api_function = set(FUNCTION_REF.findall(text)) & PUBLIC or "local.api_services" in text
        if body.get("role") in INVOKER_ROLES and api_function:
            assert (kind, name) in {
                ("google_cloud_run_v2_service_iam_member", "api_invokers"),
                ("google_cloud_run_v2_service_iam_member", "api_public"),
            }


def test_quotas_are_variables_with_the_applications_defaults_given_to_start_search() -> None:
    assert TF_LOCALS["quota_env"] == {
        "FANFUSE_RATE_PER_MINUTE": "${tostring(var.rate_per_minute)}",
        "FANFUSE_MAX_IN_FLIGHT": "${tostring(var.max_in_flight)}",
    }
    for setting in ("rate_per_minute", "max_in_flight"):
        assert variable_default(setting) == Settings.model_fields[setting].default, setting
    for name in FUNCTIONS:
        assert ("local.quota_env" in function_env(name)) == (name == "start_search"), name


def test_every_setting_given_to_a_function_is_one_fanfuse_reads() -> None:
    """A misspelt name would be ignored silently (the settings ignore unknown variables)."""
    given: set[str] = set()
    for local in ENV_LOCALS:
        value = TF_LOCALS[local]
        given |= set(value) if isinstance(value, dict) else set(ENV_NAME.findall(value))
    for name in FUNCTIONS:
        given |= set(ENV_NAME.findall(function_env(name)))
    given = {n for n in given if n.startswith("FANFUSE_")}
    assert {"FANFUSE_TRUST_GATEWAY", "FANFUSE_RATE_PER_MINUTE", "FANFUSE_PROJECT"} <= given
    known = {f"FANFUSE_{field.upper()}" for field in Settings.model_fields}
    assert given - known == set()
    # The local stack's task secret: when set it is the only check, so a deployment never has it.
    assert "TASKS_HMAC_SECRET" not in json.dumps(TF)


def test_the_local_dispatcher_has_as_many_tasks_in_flight_per_queue_as_cloud_tasks() -> None:
    """The local stack's Cloud Tasks dispatch (devstack/tasks_dispatch.py) runs as many tasks
    at once per queue as Terraform lets Cloud Tasks: the aggregate queue's limit, and the
    default deployment's platform queue's (docs), which are the one number it uses."""
    from fanfuse.tools.devstack.tasks_dispatch import MAX_CONCURRENT_DISPATCHES

    queues = resources("google_cloud_tasks_queue")
    aggregate = one(queues["aggregate"]["rate_limits"])
    assert aggregate["max_concurrent_dispatches"] == MAX_CONCURRENT_DISPATCHES
    platform = one(queues["platform"]["rate_limits"])
    assert platform["max_concurrent_dispatches"] == "${each.value.concurrency}"
    defaults = variable_default("platforms")
    assert {p["concurrency"] for p in defaults.values()} == {MAX_CONCURRENT_DISPATCHES}


def test_the_terraform_and_its_var_files_are_as_terraform_fmt_writes_them() -> None:
    """`terraform fmt -check` on infra/, both clouds and the example var files: a team's review
    runs it, and a file it would rewrite is noise in their first diff (fmt needs no provider)."""
    terraform = shutil.which(os.environ.get("FANFUSE_TERRAFORM", "terraform"))
    assert terraform, "terraform not found: install Terraform 1.10+ (docs/deploy.md)"
    checked = subprocess.run(
        [terraform, "fmt", "-check", "-recursive", "-no-color", str(INFRA)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, f"terraform fmt would rewrite: {checked.stdout}{checked.stderr}"
