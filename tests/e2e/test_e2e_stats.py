"""`GET {search_status URL}/stats` on both stacks: the functions on Firestore's emulator, and
the Lambda front (which routes `/search_status/...` to the same Flask target) on moto's
DynamoDB. Whose searches a caller's figures count, and the operator's wider view (a
search_status function of its own, with FANFUSE_OPERATORS)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from fanfuse.auth import keys
from fanfuse.tools.devstack.functions_host import FunctionProcess
from fanfuse.wire.models import utcnow
from tests.support.e2e.cloud import TERMINAL, Cloud, Runtime, http_client


@pytest.fixture(params=["gcp", "aws"])
def e2e(request: pytest.FixtureRequest) -> Runtime:
    runtime: Runtime = request.getfixturevalue(f"e2e_{request.param}")
    return runtime


def key_of(e2e: Runtime, owner: str) -> dict[str, str]:
    plaintext, record = keys.new_key(owner, "e2e stats", None, None, utcnow())
    e2e.store.put_key(record)
    return {keys.API_KEY_HEADER: plaintext}


def test_a_caller_reads_the_figures_of_its_own_searches_only(e2e: Runtime) -> None:
    view = e2e.wait(e2e.start({"query": "electrons", "platform": "docs,web_ok"}))
    assert view["status"] == "completed"
    stats_url = f"{e2e.url('search_status')}/stats"
    mine = e2e.http.get(stats_url, params={"window": "1h"})
    assert mine.status_code == 200, mine.text
    figures = mine.json()
    assert figures["scope"] == "owner" and figures["searches"] == 1 and figures["finished"] == 1
    rows = {p["name"]: p for p in figures["platforms"]}
    for name in ("docs", "web_ok"):
        contributed = [r for r in view["results"] if name in r["platforms"]]
        alone = [r for r in contributed if r["platforms"] == [name]]
        assert rows[name]["outcomes"]["succeeded"] == 1
        assert (rows[name]["results"], rows[name]["unique_results"]) == (
            len(contributed),
            len(alone),
        )
    with http_client() as anonymous:
        bob = key_of(e2e, "bob")
        theirs = anonymous.get(stats_url, headers=bob)
        assert theirs.status_code == 200 and theirs.json()["searches"] == 0
        spying = anonymous.get(stats_url, params={"owner": "key:local"}, headers=bob)
        assert spying.status_code == 403 and spying.json()["error"] == "forbidden"
        assert anonymous.get(stats_url).status_code == 401


@pytest.fixture(scope="module")
def operators_status(cloud: Cloud, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """search_status of a deployment whose operators are `key:ops`: its URL."""
    env = {**cloud.addresses.env(), **cloud.env, "FANFUSE_OPERATORS": json.dumps(["key:ops"])}
    process = FunctionProcess("search_status", env=env, log_dir=tmp_path_factory.mktemp("ops"))
    process.start()
    try:
        yield process.url
    finally:
        process.stop()


def test_an_operator_reads_every_owner_and_one_owner_on_request(
    e2e_gcp: Cloud, operators_status: str
) -> None:
    e2e_gcp.wait(e2e_gcp.start({"query": "electrons", "platform": "docs"}))
    bob = key_of(e2e_gcp, "bob")
    theirs = e2e_gcp.start({"query": "lasers", "platform": "docs"}, headers=bob)
    with http_client(headers=bob) as as_bob:

        def finished() -> bool:
            return as_bob.get(theirs["status_url"]).json()["status"] in TERMINAL

        e2e_gcp.wait_until(finished, what="bob's search finished")
    ops = key_of(e2e_gcp, "ops")
    with http_client(headers=ops) as client:
        every = client.get(f"{operators_status}/stats")
        assert every.status_code == 200, every.text
        assert every.json()["scope"] == "all" and every.json()["searches"] == 2
        one = client.get(f"{operators_status}/stats", params={"owner": "key:bob"})
        assert one.json()["scope"] == "owner" and one.json()["searches"] == 1
    answer: httpx.Response = e2e_gcp.http.get(f"{operators_status}/stats")  # key:local
    assert answer.json()["scope"] == "owner"
