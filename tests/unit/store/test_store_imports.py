"""Each cloud store imports without the other cloud's libraries: a Cloud Function is deployed
without botocore, a Lambda without google-cloud-firestore (the rehearsals install exactly
that). Checked in a child process in which the other cloud's packages cannot be imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

BLOCK = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None  # `import name` now raises ImportError
import {module}
"""


@pytest.mark.parametrize(
    ("module", "blocked"),
    [
        ("fanfuse.store.firestore", ["boto3", "botocore", "types_boto3_dynamodb"]),
        ("fanfuse.store.dynamodb", ["google", "google.cloud", "google.cloud.firestore"]),
    ],
)
def test_a_store_imports_without_the_other_clouds_libraries(
    module: str, blocked: list[str]
) -> None:
    code = BLOCK.format(module=module, blocked=blocked)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
