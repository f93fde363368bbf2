"""What the clouds refuse: the documented size limits of a function's artifact, as checks.

scripts/package-functions refuses to write an artifact over a limit (and says which, with the
way out), and tests/infra build the real artifacts and check them, so a dependency that grows a
deployment past what Lambda or Cloud Functions accept fails here, not half-way through an apply.

AWS Lambda, "Lambda quotas" (docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html;
the same numbers are the API's AccountLimit, API_AccountLimit.html):
- a .zip deployment package uploaded directly (the API's ZipFile, Terraform's `filename`):
  50 MB zipped ("Use Amazon S3 for larger files"): infra/aws uploads through S3;
- the package and its layers extracted: 250 MB unzipped, however it is uploaded;
- a function's environment variables together: 4 KB.

Google Cloud Functions, "Quotas" (cloud.google.com/functions/quotas), "Max deployment size":
100 MB compressed for the sources, 500 MB uncompressed for the sources plus the modules they
install. The page gives these for the 1st generation and "N/A" for the 2nd, which infra/ deploys
(its build is Cloud Build's, from the uploaded zip): fanfuse holds its source to them anyway, so
the same zip deploys on either generation, and the rehearsal checks the installed size too.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

MB = 1024 * 1024
"""The clouds' "MB" in these limits is 2^20 bytes (Lambda's AccountLimit gives 52428800 and
262144000 bytes)."""
LAMBDA_DIRECT_UPLOAD_ZIPPED = 50 * MB
LAMBDA_UNZIPPED = 250 * MB
LAMBDA_ENVIRONMENT = 4 * 1024
GCF_SOURCE_ZIPPED = 100 * MB
GCF_SOURCE_AND_MODULES = 500 * MB


class OverLimit(ValueError):
    """An artifact (or its environment) the cloud would refuse."""


@dataclass(frozen=True)
class Sizes:
    """An artifact's bytes as shipped (the zip) and as extracted (its files)."""

    zipped: int
    unzipped: int

    @classmethod
    def of(cls, archive: Path) -> Sizes:
        with zipfile.ZipFile(archive) as handle:
            unzipped = sum(info.file_size for info in handle.infolist())
        return cls(archive.stat().st_size, unzipped)

    def __str__(self) -> str:
        return f"{self.zipped / MB:.1f} MB zipped, {self.unzipped / MB:.1f} MB unzipped"


def check_lambda(sizes: Sizes, *, direct_upload: bool = False) -> list[str]:
    """Lambda's refusals of this package, empty when it deploys (through S3 unless
    `direct_upload`)."""
    problems = []
    if direct_upload and sizes.zipped > LAMBDA_DIRECT_UPLOAD_ZIPPED:
        problems.append(
            f"{sizes.zipped / MB:.1f} MB zipped is over Lambda's"
            f" {LAMBDA_DIRECT_UPLOAD_ZIPPED // MB} MB"
            " for a direct upload: upload it to S3 and deploy from there (infra/aws does)"
        )
    if sizes.unzipped > LAMBDA_UNZIPPED:
        problems.append(
            f"{sizes.unzipped / MB:.1f} MB unzipped is over Lambda's {LAMBDA_UNZIPPED // MB} MB"
            " for a .zip package (S3 or not): deploy fewer extras (the `vectors` platform's torch"
            " alone is larger), or a container image"
        )
    return problems


def check_gcf(sizes: Sizes, installed: int | None = None) -> list[str]:
    """Cloud Functions' refusals of this source zip (and of what it installs, when known)."""
    problems = []
    if sizes.zipped > GCF_SOURCE_ZIPPED:
        problems.append(
            f"{sizes.zipped / MB:.1f} MB zipped is over Cloud Functions'"
            f" {GCF_SOURCE_ZIPPED // MB} MB"
            " of compressed sources"
        )
    total = sizes.unzipped + (installed or 0)
    if total > GCF_SOURCE_AND_MODULES:
        problems.append(
            f"{total / MB:.1f} MB of sources and modules is over Cloud Functions'"
            f" {GCF_SOURCE_AND_MODULES // MB} MB uncompressed"
        )
    return problems


def environment_bytes(variables: dict[str, str]) -> int:
    """What Lambda counts against its 4 KB: every name and value, as UTF-8."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in variables.items())


def check_lambda_environment(name: str, variables: dict[str, str]) -> list[str]:
    used = environment_bytes(variables)
    if used > LAMBDA_ENVIRONMENT:
        return [
            f"{name}: its environment is {used} bytes, over Lambda's {LAMBDA_ENVIRONMENT}"
            " (fewer platform settings on one deployment, or shorter values)"
        ]
    return []


def refuse(problems: list[str], what: str) -> None:
    if problems:
        raise OverLimit(f"{what}: " + "; ".join(problems))
