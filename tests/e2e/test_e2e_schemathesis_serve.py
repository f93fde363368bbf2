"""schemathesis' own CLI against a real `fanfuse serve` (issues 22 and 29): `schemathesis run
URL/openapi.json --checks all`, every phase (examples, coverage, fuzzing, and the stateful one,
which follows the document's links from a started search to its status, events and cancel), must
report no failure and no error; the stateful phase must have cancelled a search it started (its
HAR report says so), and the examples phase must have run (the document carries examples).

What this adds to test_e2e_schemathesis.py (the functions on the emulator stack, driven from
Python with a chosen set of checks): every check schemathesis has, among them that a request the
schema allows is accepted (the API and the document agree: an empty query or task id is not
schema-valid) and that each Server-Sent Event matches the stream's schema, on the routes only
`serve` has. Bounded: a few examples per operation (`EXAMPLES`), a 5 s deadline so that `/search`
and the event streams end soon, and each run killed past `RUN_SECONDS`. The server is
`fanfuse serve` on 127.0.0.1 over a four-document corpus; the key is this test's own, with limits
far above what the run sends (the quota is another test's subject), and an operator's
(FANFUSE_OPERATORS), so that `/metrics` and another owner's `/stats` are answered, not refused.
Seeded (FANFUSE_FUZZ_SEED).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fanfuse.auth import keys
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tools.devstack.serve_process import ServeProcess
from fanfuse.wire.models import utcnow
from tests.support.e2e import schemathesis_cli

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
        "FANFUSE_OPERATORS": '["key:fuzz"]',
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


@pytest.mark.long(seconds=75)
def test_schemathesis_checks_all_finds_nothing_against_serve(
    served: tuple[ServeProcess, str], tmp_path: Path
) -> None:
    server, key = served
    unit = schemathesis_cli.run(
        f"{server.url}/openapi.json",
        key,
        tmp_path,
        schemathesis_cli.UNIT_PHASES,
        base_url=server.url,
        max_examples=EXAMPLES,
        seed=SEED,
        timeout=RUN_SECONDS,
    )
    assert unit.generated() > 0 and not unit.failed(), unit.output[-8000:]
    for phase in ("Examples", "Coverage", "Fuzzing"):
        assert unit.phase_passed(phase), (phase, unit.output[-4000:])
    stateful = schemathesis_cli.run(
        f"{server.url}/openapi.json",
        key,
        tmp_path,
        "stateful",
        base_url=server.url,
        max_examples=EXAMPLES,
        seed=SEED,
        timeout=RUN_SECONDS,
    )
    assert "API Links:" in stateful.output and not stateful.failed(), stateful.output[-8000:]
    calls = schemathesis_cli.stateful_calls(tmp_path)
    # The links took the phase from a started search to its cancel with its real task id: 200
    # (cancelled) or 409 (over already: the corpus answers at once), never only 404s.
    cancels = calls[("POST", "/cancel_search", 200)] + calls[("POST", "/cancel_search", 409)]
    assert cancels > 0, sorted(calls.items())
    assert calls[("GET", "/search_status/{task_id}/events", 200)] > 0, sorted(calls.items())
    (tmp_path / "schemathesis-serve.json").write_text(
        json.dumps({"seed": SEED, "generated": unit.generated() + stateful.generated()})
    )
