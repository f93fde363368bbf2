"""infra/ and cloudbuild.yaml, issue 30's Google Cloud items: one test per item, each failing on
the defect it names. No google provider can be installed here, so these read the configuration
as Terraform would evaluate it (scripts/fanfuse_deploy's evaluator) and the build as Cloud Build
would run it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from fanfuse_deploy import render
from fanfuse_deploy.hcl import Module

ROOT = Path(__file__).resolve().parents[2]
BUILD = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())
DOC = (ROOT / "docs" / "deploy.md").read_text()


def gcp(tmp_path: Path | None = None, text: str = "") -> Module:
    files = []
    if text:
        assert tmp_path is not None
        (tmp_path / "chosen.tfvars").write_text(text)
        files.append(tmp_path / "chosen.tfvars")
    return render.gcp_module(files)


def step(name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in BUILD["steps"] if s["id"] == name)
    return found


def script(name: str) -> str:
    return " ".join(step(name)["args"])


# -- Item 1: Cloud Build runs nothing its images cannot -----------------------------------------

IMAGE_TOOLS = {
    "python:3.12-slim": {"pip", "scripts/package-functions"},
    "hashicorp/terraform:1.11": {"terraform"},
    "gcr.io/google.com/cloudsdktool/google-cloud-cli:stable": {"gcloud"},
}


def test_cloud_build_runs_each_step_in_an_image_that_has_its_tools() -> None:
    """The test suite needs the Firestore emulator, Java, node, chromium: no Cloud Build image
    has them, so the build does not run it (CI does, before); each step's commands are its
    image's."""
    for item in BUILD["steps"]:
        text = " ".join(item.get("args", [])) + " " + item.get("entrypoint", "")
        assert ".ci/run" not in text and "scripts/test" not in text, item["id"]
        tools = IMAGE_TOOLS[item["name"]]
        if item["name"] == "hashicorp/terraform:1.11" and item.get("entrypoint") != "sh":
            continue  # the image's entrypoint is terraform
        assert commands_of(item["args"][-1]) <= tools, item["id"]


def commands_of(script: str) -> set[str]:
    """The commands a bash/sh script runs (shell builtins and tests left out)."""
    found: set[str] = set()
    for line in script.replace("\\\n", " ").splitlines():
        line = re.sub(r"\$\{\w+\}|\$\w+|\"[^\"]*\"", "X", line.strip())  # values, not commands
        found |= set(re.findall(r"(?:^|&&|;|\|\||\bthen\b|\belse\b|\s\{)\s*([\w./-]+)", line))
    return found - {"if", "fi", "then", "else", "echo", "exit", "[", "]"}


# -- Item 7: the state bucket and the backend, never a prompt -----------------------------------


def test_the_backend_is_configured_at_init_and_the_state_bucket_documented() -> None:
    versions = (ROOT / "infra" / "versions.tf").read_text()
    assert 'backend "gcs" {}' in versions
    init = step("tf-init")["args"]
    assert "-input=false" in init
    assert "-backend-config=bucket=${_TF_STATE_BUCKET}" in init
    assert "-backend-config=prefix=fanfuse" in init
    assert "gcloud storage buckets create gs://$PROJECT-tf-state" in DOC
    aws_versions = (ROOT / "infra" / "aws" / "versions.tf").read_text()
    assert 'backend "s3" {}' in aws_versions


# -- Item 8: an existing database keeps the app's rules -----------------------------------------


def test_an_existing_database_keeps_its_rules_unless_the_operator_takes_them_over(
    tmp_path: Path,
) -> None:
    def releases(module: Module) -> int:
        (release,) = module.resources("google_firebaserules_release").values()
        count: int = module.value(release["count"], {})
        return count

    assert releases(gcp()) == 1  # a database infra/ creates gets fanfuse's rules
    assert releases(gcp(tmp_path, "create_database = false\n")) == 0
    assert releases(gcp(tmp_path, "create_database = false\nmanage_firestore_rules = true\n")) == 1
    (ruleset,) = (
        gcp(tmp_path, "create_database = false\n")
        .resources("google_firebaserules_ruleset")
        .values()
    )
    assert gcp(tmp_path, "create_database = false\n").value(ruleset["count"], {}) == 0
    # The import of the existing release, at the address the release has with its count.
    assert "import" in DOC and "'google_firebaserules_release.firestore[0]'" in DOC
    assert "projects/$PROJECT/releases/cloud.firestore" in DOC


# -- Item 9: the build's account, its grants, the APIs ------------------------------------------

ROLE_OF = {
    "google_project_service": "roles/serviceusage.serviceUsageAdmin",
    "google_firestore_": "roles/datastore.owner",
    "google_firebaserules_": "roles/firebaserules.admin",
    "google_storage_bucket": "roles/storage.admin",
    "google_cloudfunctions2_function": "roles/cloudfunctions.admin",
    "google_cloud_run_v2_service_iam_member": "roles/run.admin",
    "google_service_account": "roles/iam.serviceAccountAdmin",
    "google_project_iam_member": "roles/resourcemanager.projectIamAdmin",
    "google_cloud_tasks_queue": "roles/cloudtasks.admin",
    "google_secret_manager_secret_iam_member": "roles/secretmanager.admin",
    "google_logging_metric": "roles/logging.configWriter",
    "google_monitoring_alert_policy": "roles/monitoring.alertPolicyEditor",
    "google_monitoring_notification_channel": "roles/monitoring.notificationChannelEditor",
    "google_billing_budget": "roles/billing.costsManager",
}
API_OF = {
    "google_project_iam_member": "cloudresourcemanager.googleapis.com",
    "google_monitoring_": "monitoring.googleapis.com",
    "google_billing_budget": "billingbudgets.googleapis.com",
    "google_cloud_tasks_queue": "cloudtasks.googleapis.com",
    "google_firebaserules_": "firebaserules.googleapis.com",
    "google_firestore_": "firestore.googleapis.com",
    "google_cloudfunctions2_function": "cloudfunctions.googleapis.com",
    "google_logging_metric": "logging.googleapis.com",
    "google_secret_manager_secret": "secretmanager.googleapis.com",
}


def granted_roles() -> set[str]:
    loop = re.search(r"for role in (.+?); do gcloud projects add-iam-policy-binding", DOC)
    assert loop is not None
    roles = set(loop.group(1).split())
    if "--role=roles/billing.costsManager" in DOC:
        roles.add("roles/billing.costsManager")
    return roles


def resource_types(module: Module) -> set[str]:
    return {unquote for block in module.blocks.get("resource", []) for unquote in block}


def test_the_build_account_is_granted_what_each_resource_needs_and_writes_its_logs() -> None:
    module = render.gcp_module([])
    roles = granted_roles()
    assert "roles/logging.logWriter" in roles  # the build's own logs
    for kind in resource_types(module):
        name = kind.strip('"')
        role = next((r for prefix, r in ROLE_OF.items() if name.startswith(prefix)), None)
        assert role is not None, f"{name}: which role creates it? (add it here and to the guide)"
        assert role in roles, (name, role)
    assert "gcloud iam service-accounts create fanfuse-deployer" in DOC
    assert "--service-account=projects/$PROJECT/serviceAccounts/fanfuse-deployer@" in DOC


def test_every_api_a_resource_needs_is_enabled() -> None:
    module = render.gcp_module([])
    services = module.resources("google_project_service")
    enabled = set(module.value(services["apis"]["for_each"], {}))
    # Each other service resource enables one API of an optional feature (tracing.tf: Cloud Trace).
    enabled |= {module.value(s["service"], {}) for n, s in services.items() if n != "apis"}
    assert "cloudresourcemanager.googleapis.com" in enabled
    for kind in resource_types(module):
        name = kind.strip('"')
        for prefix, api in API_OF.items():
            if name.startswith(prefix):
                assert api in enabled, (name, api)


# -- Item 10: no allUsers in the example; the build applies a saved plan -----------------------


def test_the_example_is_not_public_and_the_build_applies_only_a_reviewed_or_chosen_plan() -> None:
    module = render.gcp_module([render.EXAMPLES / "gcp.tfvars"])
    assert module.variables["api_access"] == "iam"
    assert "iam.allowedPolicyMemberDomains" in DOC
    for item in BUILD["steps"]:
        assert "-auto-approve" not in " ".join(item.get("args", [])), item["id"]
    assert "-out=fanfuse.tfplan" in script("tf-plan")
    assert "terraform -chdir=infra apply -input=false fanfuse.tfplan" in script("tf-apply")
    assert '"${_APPLY}" != "true"' in script("tf-apply") and "_APPLY_PLAN" in script("tf-apply")
    assert BUILD["substitutions"]["_APPLY"] == "false"
    assert "plans/$BUILD_ID.tfplan" in script("save-plan")


# -- Item 11: optional costs as variables, off by default ---------------------------------------


def test_optional_costs_are_variables_off_by_default(tmp_path: Path) -> None:
    module = gcp()
    (database,) = module.resources("google_firestore_database").values()
    pitr = database["point_in_time_recovery_enablement"]
    assert module.value(pitr, {}) == "POINT_IN_TIME_RECOVERY_DISABLED"
    on = gcp(tmp_path, "point_in_time_recovery = true\n")
    assert on.value(pitr, {}) == "POINT_IN_TIME_RECOVERY_ENABLED"
    for queue in module.resources("google_cloud_tasks_queue").values():
        sampling = queue["stackdriver_logging_config"][0]["sampling_ratio"]
        assert module.value(sampling, {}) == 0
    protection = database["delete_protection_state"]
    assert module.value(protection, {}) == "DELETE_PROTECTION_ENABLED"
    lifted = gcp(tmp_path, "deletion_protection = false\n")
    assert lifted.value(protection, {}) == "DELETE_PROTECTION_DISABLED"


# -- Item 12: alerts as code, to the notification channels; the budget optional -----------------


def test_alert_policies_cover_deliveries_errors_latency_and_spend(tmp_path: Path) -> None:
    module = gcp(tmp_path, 'alert_emails = ["ops@example.com"]\n')
    (policy,) = module.resources("google_monitoring_alert_policy").values()
    assert set(module.value(policy["for_each"], {})) == {
        "deliveries_failing", "error_rate", "search_p95", "spend_per_day",
    }  # fmt: skip
    assert policy["notification_channels"] == "${local.alert_channels}"
    channels = module.resources("google_monitoring_notification_channel")["email"]
    assert module.value(channels["for_each"], {}) == ["ops@example.com"]
    promql = module.local("promql")
    # The figures the log-based metrics define (monitoring.tf), as PromQL names them.
    metrics = module.resources("google_logging_metric")
    for key, metric in (("search_p95", "search_latency"), ("spend_per_day", "cost_usd")):
        assert f"logging_googleapis_com:user_fanfuse_{metric}_" in promql[key]
    assert module.value(metrics["search_latency"]["value_extractor"], {}) == (
        "EXTRACT(jsonPayload.duration_s)"
    )
    (budget,) = module.resources("google_billing_budget").values()
    assert module.value(budget["count"], {}) == 0  # optional
    billed = gcp(tmp_path, 'billing_account = "000000-000000-000000"\n')
    assert billed.value(budget["count"], {}) == 1
