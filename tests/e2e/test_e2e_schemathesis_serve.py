"""schemathesis' own CLI against a real `fanfuse serve` (issue 22, item 3): `schemathesis run
URL/openapi.json --checks all`, every phase (examples, coverage, fuzzing, and the stateful one,
which follows the document's links from a started search to its status, events and cancel), must
report no failure and no error.

What this adds to test_e2e_schemathesis.py (the functions on the emulator stack, driven from
Python with a chosen set of checks): every check schemathesis has, among them that a request the
schema allows is accepted (the API and the document agree: an empty query or task id is not
schema-valid) and that each Server-Sent Event matches the stream's schema, on the routes only
`serve` has. Bounded: a few examples per operation (`EXAMPLES`), a 5 s deadline so that `/search`
and the event streams end soon, and the run itself killed past `RUN_SECONDS`. The server is
`fanfuse serve` on 127.0.0.1 over a four-document corpus; the key is this test's own, with limits
far above what the run sends (the quota is another test's subject). Seeded (FANFUSE_FUZZ_SEED).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fanfuse.auth import keys
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tools.devstack.serve import ServeProcess
from fanfuse.wire.models import utcnow

SEED = os.environ.get("FANFUSE_FUZZ_SEED", "20251122")
EXAMPLES = 10
"""Per operation and phase: keeps the run under about two minutes on two cores."""
RUN_SECONDS = 300
DOCS = {
    "D1": "Microwave radiation fed through a rectangular waveguide.",
    "D2": "The dielectric constant of liquids measured at microwave frequencies.",
    "D3": "A laser produces coherent light by stimulated emission.",
    "D4": "Plasma waves propagate in the ionosphere.",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, str]]:
    """`fanfuse serve` on a tiny corpus, and a key of this test's own."""
    tmp = tmp_path_factory.mktemp("serve-fuzz")
    corpus = tmp / "lab.trec"
    corpus.write_text(
        "".join(f"<DOC>\n<DOCNO>{k}</DOCNO>\n<TEXT>{v}</TEXT>\n</DOC>\n" for k, v in DOCS.items()),
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
    env |= {
        "FANFUSE_CACHE_DIR": str(tmp / "cache"),
        "FANFUSE_DB_PATH": str(tmp / "serve.db"),
        "FANFUSE_DOCS_CORPUS": str(corpus),
        "FANFUSE_VECTORS_CORPUS": str(corpus),
        "FANFUSE_PROGRESS_INTERVAL": "0",
        "FANFUSE_DEADLINE_SECONDS": "5",
    }
    with ServeProcess("--warm", "docs", env=env, log_dir=tmp) as server:
        store = SqliteStore(env["FANFUSE_DB_PATH"])
        try:
            plaintext, record = keys.new_key(
                "fuzz",
                "schemathesis",
                rate_per_minute=1_000_000,
                max_in_flight=10_000,
                now=utcnow(),
            )
            store.put_key(record)
        finally:
            store.close()
        yield server, plaintext


def test_schemathesis_checks_all_finds_nothing_against_serve(
    served: tuple[ServeProcess, str], tmp_path: Path
) -> None:
    server, key = served
    cli = shutil.which("schemathesis") or str(Path(sys.executable).with_name("schemathesis"))
    command = [
        cli,
        "run",
        f"{server.url}/openapi.json",
        "--url",
        server.url,
        "--checks",
        "all",
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        SEED,
        "--request-timeout",
        "30",
        "--no-color",
        "--report",
        "junit",
        "--report-dir",
        str(tmp_path),
        "-H",
        f"{keys.API_KEY_HEADER}: {key}",
    ]
    run = subprocess.run(
        command, capture_output=True, text=True, timeout=RUN_SECONDS, cwd=tmp_path, check=False
    )
    output = run.stdout + run.stderr
    shown = [*command[:-1], f"{keys.API_KEY_HEADER}: $FANFUSE_API_KEY"]
    print(f"\n{' '.join(shown)}\n{output[-4000:]}")
    summary = re.search(r"Test cases:\s*\n\s*(\d+) generated", output)
    assert summary and int(summary.group(1)) > 0, output[-4000:]
    assert "Stateful" in output and "API Links:" in output, output[-4000:]  # the phase ran
    assert run.returncode == 0, output[-8000:]
    assert not re.search(r"\d+ (failures?|errors?)", output.rsplit("SUMMARY", 1)[-1]), output
    (tmp_path / "schemathesis-serve.json").write_text(
        json.dumps({"seed": SEED, "generated": int(summary.group(1)), "returncode": 0})
    )
