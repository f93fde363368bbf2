"""The clouds' documented limits, as checks that refuse (issue 30, item 2; limits.py cites them).

An artifact over Lambda's 250 MB unzipped, or a direct upload over its 50 MB zipped, or a source
over Cloud Functions' 100 MB compressed / 500 MB with its modules, is refused by the packaging
script before anything is written; a function environment over Lambda's 4 KB fails too. The
real artifacts are built by the rehearsals (tests/infra/test_rehearsal.py), which check them
against the same functions; here a built Cloud Functions source shows the development tools left
out, and zips made to measure show each refusal.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from fanfuse_deploy import limits, package, render

from tests.infra.test_contract import AWS_CASES, aws_envs

MB = limits.MB


def zeros_zip(path: Path, unzipped: int, name: str = "blob.bin") -> Path:
    """A zip holding `unzipped` bytes of zeros: a few hundred KB on disk whatever the size."""
    chunk = bytes(MB)
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open(name, "w", force_zip64=True) as entry,
    ):
        for _ in range(unzipped // MB):
            entry.write(chunk)
        entry.write(bytes(unzipped % MB))
    return path


def test_the_numbers_are_the_documented_ones() -> None:
    # Lambda's AccountLimit: CodeSizeZipped 52428800, CodeSizeUnzipped 262144000 bytes.
    assert limits.LAMBDA_DIRECT_UPLOAD_ZIPPED == 52_428_800
    assert limits.LAMBDA_UNZIPPED == 262_144_000
    assert limits.LAMBDA_ENVIRONMENT == 4096
    assert (limits.GCF_SOURCE_ZIPPED, limits.GCF_SOURCE_AND_MODULES) == (100 * MB, 500 * MB)


def test_a_lambda_zip_over_50_mb_is_refused_for_a_direct_upload_only() -> None:
    sizes = limits.Sizes(zipped=limits.LAMBDA_DIRECT_UPLOAD_ZIPPED + 1, unzipped=200 * MB)
    (problem,) = limits.check_lambda(sizes, direct_upload=True)
    assert "direct upload" in problem and "S3" in problem
    assert limits.check_lambda(sizes) == []  # through S3, as infra/aws deploys it
    at_limit = limits.Sizes(zipped=limits.LAMBDA_DIRECT_UPLOAD_ZIPPED, unzipped=200 * MB)
    assert limits.check_lambda(at_limit, direct_upload=True) == []


def test_infra_aws_deploys_the_zip_through_s3_never_as_a_direct_upload() -> None:
    module = render.aws_module([])
    (function,) = module.resources("aws_lambda_function").values()
    assert "filename" not in function and "image_uri" not in function
    assert function["s3_bucket"] == "${aws_s3_bucket.artifacts.id}"
    assert function["s3_key"] == "${var.lambda_s3_key}"


def test_a_lambda_package_over_250_mb_unzipped_is_refused_and_not_written(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    with (tree / "blob.bin").open("wb") as blob:  # sparse: no disk spent
        blob.truncate(limits.LAMBDA_UNZIPPED + 1)
    out = tmp_path / "lambda.zip"
    with pytest.raises(limits.OverLimit, match="250 MB"):
        package._write_checked(tree, out, limits.check_lambda, "Lambda")
    assert not out.exists() and not list(tmp_path.glob("*.partial"))
    # At the limit, Lambda takes it.
    zeros_zip(tmp_path / "fits.zip", limits.LAMBDA_UNZIPPED)
    assert limits.check_lambda(limits.Sizes.of(tmp_path / "fits.zip")) == []


def test_a_cloud_functions_source_over_its_limits_is_refused(tmp_path: Path) -> None:
    compressed = limits.Sizes(
        zipped=limits.GCF_SOURCE_ZIPPED + 1, unzipped=limits.GCF_SOURCE_ZIPPED + 1
    )
    assert any("compressed" in p for p in limits.check_gcf(compressed))
    source = limits.Sizes.of(zeros_zip(tmp_path / "src.zip", 10 * MB))
    assert limits.check_gcf(source) == []
    # The installed modules count with the sources (the rehearsal measures them).
    assert any("uncompressed" in p for p in limits.check_gcf(source, installed=491 * MB))
    assert limits.check_gcf(source, installed=400 * MB) == []


@pytest.mark.parametrize("case", AWS_CASES)
def test_every_functions_environment_fits_lambdas_4_kb(case: str) -> None:
    for name, env in aws_envs(AWS_CASES[case]).items():
        assert limits.check_lambda_environment(name, env) == [], name
    huge = {f"FANFUSE_X_{i}": "v" * 100 for i in range(40)}
    assert limits.check_lambda_environment("worker", huge)


def test_the_cloud_functions_source_ships_no_development_tools(tmp_path: Path) -> None:
    """The functions' artifacts leave fanfuse.tools out (DESIGN.md: development only); the
    rehearsals then run the functions from them, so they import and work without it."""
    out = tmp_path / "function.zip"
    sizes = package.package_gcp(out, package.extras_for("gcp", ["docs"]))
    assert limits.check_gcf(sizes) == []
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        (wheel,) = [n for n in names if n.endswith(".whl")]
        requirements = archive.read("requirements.txt").decode()
    assert requirements.strip() == f"./{wheel}[cloud,docs]"  # corpus platforms only: no `web`
    assert package.development_files(out) == []
    with zipfile.ZipFile(out) as archive:
        inner = tmp_path / "inner.whl"
        inner.write_bytes(archive.read(wheel))
    with zipfile.ZipFile(inner) as built:
        shipped = built.namelist()
        (record,) = [n for n in shipped if n.endswith(".dist-info/RECORD")]
        listed = [line.split(",")[0] for line in built.read(record).decode().splitlines()]
    assert "fanfuse/fronts/aws_lambda/front.py" in shipped
    assert not [n for n in shipped + listed if n.startswith("fanfuse/tools/")]
    assert set(listed) == set(shipped)  # RECORD lists exactly what the wheel holds


def test_the_development_tools_check_finds_them(tmp_path: Path) -> None:
    """The check above can fail: a zip with fanfuse/tools in it, directly or in its wheel."""
    direct = tmp_path / "direct.zip"
    with zipfile.ZipFile(direct, "w") as archive:
        archive.writestr("fanfuse/tools/bench/load.py", "")
    wheel = tmp_path / "fanfuse-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("fanfuse/tools/stubs.py", "")
    nested = tmp_path / "nested.zip"
    with zipfile.ZipFile(nested, "w") as archive:
        archive.write(wheel, wheel.name)
    assert package.development_files(direct) == ["fanfuse/tools/bench/load.py"]
    assert package.development_files(nested) == [f"{wheel.name}!fanfuse/tools/stubs.py"]
    assert json.dumps(package.DEVELOPMENT_ONLY) == '["fanfuse/tools/"]'
