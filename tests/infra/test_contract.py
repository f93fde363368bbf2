"""The contract between infra/ and the code, on the environment Terraform actually renders.

For the defaults and every example var file, on both clouds: every `FANFUSE_*` variable and
secret a function gets is a settings field (fanfuse's, or a deployed platform's own), every
deployed platform gets the settings it requires, and the package ships each one's extra. Plus:
the rules and indexes are released by Terraform resources, and no Cloud Build step needs what a
later step creates. Rendered by scripts/fanfuse_deploy, the code the rehearsal runs.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from fanfuse_deploy import package, render
from pydantic import ValidationError

from fanfuse.platforms import BUILTIN, load_engine
from fanfuse.rerank.llm import LlmRerankSettings
from fanfuse.settings import Settings
from fanfuse.settings.content import ContentSettings

ROOT = Path(__file__).resolve().parents[2]
GCP_CASES = {"defaults": [], **{p.name: [p] for p in sorted(render.EXAMPLES.glob("gcp*.tfvars"))}}
AWS_CASES = {"defaults": [], **{p.name: [p] for p in sorted(render.EXAMPLES.glob("aws*.tfvars"))}}
NOT_FANFUSE = {"GOOGLE_CLOUD_PROJECT", "LOG_EXECUTION_ID"}


def gcp_envs(var_files: list[Path]) -> dict[str, dict[str, str]]:
    module = render.gcp_module(var_files)
    stand_in = {env: f"secret:{secret}" for env, secret in module.local("secrets").items()}
    return render.gcp_environments(module, stand_in)


def aws_envs(var_files: list[Path]) -> dict[str, dict[str, str]]:
    return render.aws_environments(render.aws_module(var_files))


def platform_fields(name: str) -> set[str]:
    platform = load_engine(name)
    return {platform.settings_env_name(field) for field in platform.settings_model.model_fields}


def settings_names() -> set[str]:
    """Every name the deployment-wide settings classes read: Settings, the content stage's
    and the LLM reranker's (each with its own prefix)."""
    names = {f"FANFUSE_{field.upper()}" for field in Settings.model_fields}
    names |= {f"FANFUSE_CONTENT_{field.upper()}" for field in ContentSettings.model_fields}
    names |= {f"FANFUSE_RERANK_LLM_{field.upper()}" for field in LlmRerankSettings.model_fields}
    return names


def unread_names(env: dict[str, str], deployed: list[str]) -> set[str]:
    """Names no settings class reads: not a deployment setting, not a deployed platform's."""
    known = settings_names()
    for name in deployed:
        known |= platform_fields(name)
    return {n for n in env if n not in known and n not in NOT_FANFUSE}


def missing_settings(env: dict[str, str], deployed: list[str]) -> dict[str, str]:
    """Deployed platforms whose settings do not validate from `env` alone, and why."""
    problems: dict[str, str] = {}
    for name in deployed:
        platform = load_engine(name)
        prefix = platform.env_prefix
        given = {
            key[len(prefix) :].lower(): value
            for key, value in env.items()
            if key.startswith(prefix)
        }
        try:
            platform.settings_model.model_validate(given)
        except ValidationError as exc:
            problems[name] = "; ".join(
                f"{platform.settings_env_name(str(e['loc'][0]))}: {e['msg']}" for e in exc.errors()
            )
    return problems


@pytest.mark.parametrize("case", GCP_CASES)
def test_gcp_every_name_terraform_sets_is_a_setting_and_every_platform_is_configured(
    case: str,
) -> None:
    envs = gcp_envs(GCP_CASES[case])
    deployed = sorted(json.loads(envs["start_search"]["FANFUSE_DEPLOYED_PLATFORMS"]))
    assert set(deployed) <= set(BUILTIN)
    for target, env in envs.items():
        assert unread_names(env, deployed) == set(), target
    assert missing_settings(envs["run_platform"], deployed) == {}
    # Only run_platform calls providers, so only it gets their settings and keys.
    provider_names = set().union(*(platform_fields(p) for p in deployed))
    for target, env in envs.items():
        if target != "run_platform":
            assert not provider_names & set(env), target


@pytest.mark.parametrize("case", AWS_CASES)
def test_aws_every_name_terraform_sets_is_a_setting_and_every_platform_is_configured(
    case: str,
) -> None:
    envs = aws_envs(AWS_CASES[case])
    named = Settings(
        extra_platforms=json.loads(envs["worker"].get("FANFUSE_EXTRA_PLATFORMS", "{}"))
    ).extra_platforms
    # A named instance (a corpus platform, corpus.tf) is deployed, and valid on its own settings.
    for name, spec in named.items():
        assert name in json.loads(envs["worker"]["FANFUSE_DEPLOYED_PLATFORMS"]), name
        load_engine(spec.engine, name, spec.settings).settings_model.model_validate(spec.settings)
    deployed = sorted(
        p for p in json.loads(envs["worker"]["FANFUSE_DEPLOYED_PLATFORMS"]) if p not in named
    )
    assert set(deployed) <= set(BUILTIN)
    # The local rehearsal hosts the three handlers in one process with the union of their
    # environments: that is right only while they agree on every name they share.
    hosted = render.union(envs)
    for target, env in envs.items():
        assert unread_names(env, deployed) == set(), target
        assert env.items() <= hosted.items(), target
        assert env["FANFUSE_CACHE_DIR"].startswith("/tmp/"), target  # Lambda: only /tmp
    assert missing_settings(envs["worker"], deployed) == {}
    # Only `http` has callers, so only it is told how to verify them.
    caller_names = {n for n in envs["http"] if n not in envs["worker"]}
    assert "FANFUSE_TRUST_IAM_AUTHORIZER" in caller_names
    assert not caller_names & set(envs["aggregator"])


def test_a_drift_is_caught() -> None:
    """The checks above can fail: a misspelt name, and a platform deployed without its setting."""
    assert unread_names({"FANFUSE_SEARXNG_URL": "x"}, ["searxng"]) == {"FANFUSE_SEARXNG_URL"}
    assert unread_names({"FANFUSE_WEIXIN_API_KEY": "x"}, ["weixin"]) == {"FANFUSE_WEIXIN_API_KEY"}
    assert set(missing_settings({}, ["searxng", "weixin", "wikipedia", "docs"])) == {
        "searxng", "weixin", "wikipedia",
    }  # fmt: skip


@pytest.mark.parametrize("case", ["gcp-providers.tfvars"])
def test_every_platform_can_be_deployed_from_the_reference_example(case: str) -> None:
    envs = gcp_envs(GCP_CASES[case])
    deployed = json.loads(envs["run_platform"]["FANFUSE_DEPLOYED_PLATFORMS"])
    assert set(deployed) == set(BUILTIN) - {"vectors"}  # vectors: a model per instance


def test_each_deployed_platforms_extra_exists_and_is_packaged() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for cloud in ("gcp", "aws"):
        for extra in package.BASE_EXTRAS[cloud]:
            assert extra in extras
    for platform, extra in package.PLATFORM_EXTRAS.items():
        assert platform in BUILTIN and extra in extras
        assert extra in package.extras_for("gcp", [platform])
    # The functions' core is lean: no CLI, evaluation or offline stack unless deployed.
    core = " ".join(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    for heavy in ("typer", "rich", "ir-measures", "bm25s", "numpy"):
        assert heavy not in core
    assert package.extras_for("gcp", ["wikipedia"]) == ["cloud", "web"]


def test_the_rules_and_indexes_are_released_by_terraform_resources() -> None:
    module = render.gcp_module([])
    (ruleset,) = module.resources("google_firebaserules_ruleset").values()
    (files,) = ruleset["source"][0]["files"]
    assert files["content"] == '${file("${path.module}/firestore.rules")}'
    assert (ROOT / "infra" / "firestore.rules").exists()
    (release,) = module.resources("google_firebaserules_release").values()
    assert release["name"] == '"cloud.firestore"'
    assert "google_firebaserules_ruleset.firestore[0].name" in release["ruleset_name"]
    assert "google_firebaserules_ruleset.firestore[0]" in str(release["lifecycle"])
    assert module.value(release["count"], {}) == 1  # on the database infra/ creates
    assert module.resources("google_firestore_index")
    assert "firebaserules.googleapis.com" in str(module.resources("google_project_service"))


def test_no_build_step_needs_what_a_later_step_creates() -> None:
    """The upload needs the source bucket: a step before it creates it. The functions mount the
    provider secrets: Terraform only reads them (data sources: they exist before the build)."""
    build = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())
    ids = [step["id"] for step in build["steps"]]
    assert ids.index("package") < ids.index("upload") < ids.index("tf-plan") < ids.index("tf-apply")
    bootstrap = build["steps"][ids.index("tf-bootstrap")]
    assert ids.index("tf-bootstrap") < ids.index("upload")
    assert "-target=google_storage_bucket.function_source" in " ".join(bootstrap["args"])
    module = render.gcp_module([])
    bucket = module.resources("google_storage_bucket")["function_source"]["name"]
    upload = " ".join(build["steps"][ids.index("upload")]["args"])
    assert bucket == '"${var.project_id}-fanfuse-source"'
    assert "gs://$PROJECT_ID-fanfuse-source/" in upload
    assert "scripts/package-functions gcp build/function.zip" in str(
        build["steps"][ids.index("package")]
    )
    assert not module.resources("google_secret_manager_secret")
    run_platform = module.resources("google_cloudfunctions2_function")["run_platform"]
    assert "data.google_secret_manager_secret.provider" in str(run_platform)
    for step in build["steps"]:
        if step["id"] in ("tf-bootstrap", "tf-plan"):
            assert "-var-file=${_VAR_FILE}" in " ".join(step["args"]), step["id"]
    assert re.search(r"_VAR_FILE: examples/gcp\.tfvars", (ROOT / "cloudbuild.yaml").read_text())


def settings_in(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The Settings a function builds from exactly `env` (nothing of this process's)."""
    for name in [n for n in os.environ if n.startswith("FANFUSE_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()


@pytest.mark.parametrize("case", GCP_CASES)
def test_gcp_public_functions_accept_no_google_token_and_no_anonymous_user_by_default(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    envs = gcp_envs(GCP_CASES[case])
    for target in ("start_search", "search_status", "cancel_search"):
        settings = settings_in(envs[target], monkeypatch)
        assert settings.auth_required and settings.firebase_project == "demo-fanfuse", target
        assert settings.id_token_principals == [] and settings.id_token_audiences == []
        assert settings.firebase_sign_in_providers is None  # rendered "null": any provider
        assert settings.firebase_allow_anonymous is False
        assert settings.trust_gateway is False and settings.trust_iam_authorizer is False


@pytest.mark.parametrize("api_access", ["iam", "public"])
def test_aws_http_verifies_callers_as_api_access_says(
    api_access: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`iam`: the principal API Gateway verified is the caller; `public`: only what the function
    verifies itself. Tokens as the variables say, nothing accepted by default."""
    chosen = tmp_path / "access.tfvars"
    chosen.write_text(
        f'api_access = "{api_access}"\n'
        'firebase_project = "my-app-prod"\n'
        'id_token_audiences = ["https://api.example.com"]\n'
        'id_token_principals = ["backend@my-app-prod.iam.gserviceaccount.com"]\n'
        'firebase_sign_in_providers = ["password", "google.com"]\n'
    )
    module = render.aws_module([chosen])
    (routes,) = module.resources("aws_apigatewayv2_route").values()
    authorization = module.value(routes["authorization_type"], {})
    assert authorization == ("AWS_IAM" if api_access == "iam" else "NONE")
    http = settings_in(render.aws_environments(module)["http"], monkeypatch)
    assert http.trust_iam_authorizer is (api_access == "iam")
    assert http.auth_required and http.firebase_project == "my-app-prod"
    assert http.id_token_audiences == ["https://api.example.com"]
    assert http.id_token_principals == ["backend@my-app-prod.iam.gserviceaccount.com"]
    assert http.firebase_sign_in_providers == ["password", "google.com"]
    assert http.firebase_allow_anonymous is False
    defaults = settings_in(aws_envs([])["http"], monkeypatch)
    assert defaults.trust_iam_authorizer is True  # api_access defaults to "iam"
    assert not defaults.firebase_project and defaults.id_token_principals == []
    assert defaults.firebase_sign_in_providers is None and not defaults.firebase_allow_anonymous
