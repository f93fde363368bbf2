"""corpus.tf on both clouds, rendered as the deploy renders it: the corpus platforms reach every
function with their corpus URL, only run_platform / the worker may read the bucket, and the
artifact installs the engines' extras (and what a corpus-only Lambda leaves out)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fanfuse_deploy import package, render

from fanfuse.settings import Settings

CORPORA = {
    "handbook": {"engine": "docs", "corpus": "team/handbook"},
    "handbook_vectors": {"engine": "vectors", "corpus": "team/handbook"},
}


def var_file(tmp_path: Path, cloud: str, bucket: str | None) -> Path:
    if cloud == "gcp":
        queue = {"rate": 50, "concurrency": 20, "max_attempts": 3}
        platforms: Any = {"docs": queue, **dict.fromkeys(CORPORA, queue)}
    else:
        platforms = ["docs", *CORPORA]
    values: dict[str, Any] = {"platforms": platforms, "corpus_platforms": CORPORA}
    if bucket is not None:
        values["corpus_bucket"] = bucket
    path = tmp_path / f"{cloud}.tfvars"
    path.write_text("".join(f"{name} = {json.dumps(value)}\n" for name, value in values.items()))
    return path


def extra_platforms(env: dict[str, str]) -> dict[str, Any]:
    parsed = Settings(extra_platforms=json.loads(env["FANFUSE_EXTRA_PLATFORMS"])).extra_platforms
    return {name: (p.engine, p.settings["corpus_url"]) for name, p in parsed.items()}


def test_gcp_every_function_knows_the_corpus_platforms_and_only_run_platform_reads(
    tmp_path: Path,
) -> None:
    module = render.gcp_module([var_file(tmp_path, "gcp", None)])
    envs = render.gcp_environments(module, {k: "v" for k in module.local("secrets")})
    bucket = "demo-fanfuse-fanfuse-corpora"
    for name, env in envs.items():
        assert extra_platforms(env) == {
            "handbook": ("docs", f"gs://{bucket}/team/handbook"),
            "handbook_vectors": ("vectors", f"gs://{bucket}/team/handbook"),
        }, name
    created = module.resources("google_storage_bucket")["corpora"]
    assert module.value(created["count"], {}) == 1
    assert module.value(created["public_access_prevention"], {}) == "enforced"
    (grant,) = [
        g
        for g in module.resources("google_storage_bucket_iam_member").values()
        if "corpora" in str(g["bucket"])
    ]
    assert module.value(grant["role"], {}) == "roles/storage.objectViewer"
    assert "run_platform" in str(grant["member"])


def test_gcp_an_existing_bucket_is_used_as_it_is_and_no_corpus_adds_nothing(
    tmp_path: Path,
) -> None:
    module = render.gcp_module([var_file(tmp_path, "gcp", "our-corpora")])
    envs = render.gcp_environments(module, {k: "v" for k in module.local("secrets")})
    assert extra_platforms(envs["start_search"])["handbook"][1] == "gs://our-corpora/team/handbook"
    bucket = module.resources("google_storage_bucket")["corpora"]
    assert module.value(bucket["count"], {}) == 0
    plain = render.gcp_module([])
    plain_envs = render.gcp_environments(plain, {k: "v" for k in plain.local("secrets")})
    assert all("FANFUSE_EXTRA_PLATFORMS" not in env for env in plain_envs.values())


def test_aws_every_function_knows_the_corpus_platforms_and_only_the_worker_reads(
    tmp_path: Path,
) -> None:
    module = render.aws_module([var_file(tmp_path, "aws", "our-corpora")])
    for name, env in render.aws_environments(module).items():
        assert extra_platforms(env) == {
            "handbook": ("docs", "s3://our-corpora/team/handbook"),
            "handbook_vectors": ("vectors", "s3://our-corpora/team/handbook"),
        }, name
    policy = module.resources("aws_iam_role_policy")["worker_reads_corpora"]
    assert 'aws_iam_role.function["worker"]' in str(policy["role"])
    statements = module.data("aws_iam_policy_document")["worker_reads_corpora"]["statement"]
    actions = sorted(a for s in statements for a in module.value(s["actions"], {}))
    assert actions == ["s3:GetObject", "s3:ListBucket"]  # read only: no Put, no Delete
    assert module.value(module.resources("aws_s3_bucket")["corpora"]["count"], {}) == 0


def test_the_artifact_installs_each_corpus_platforms_engine(tmp_path: Path) -> None:
    for cloud in ("gcp", "aws"):
        engines = package.deployed_engines(cloud, [var_file(tmp_path, cloud, "b")])
        assert engines == ["docs", "vectors"], cloud
        assert "vectors" in package.extras_for(cloud, engines)
    # Only corpus engines: no page is fetched, so no `web` extra (a Lambda under 250 MB).
    assert package.extras_for("aws", ["docs", "vectors"]) == ["lambda", "docs", "vectors"]
    assert package.extras_for("aws", ["docs", "wikipedia"]) == ["lambda", "web", "docs"]
    assert "manylinux_2_28_x86_64" in package.lambda_platforms("3.12")
    assert "manylinux_2_28_x86_64" not in package.lambda_platforms("3.11")
