"""schemathesis against the local stack (issue 10, item 3): the public calls, fuzzed from the
one OpenAPI document, answer every generated request without a 5xx, every error as an ErrorBody
in JSON, and write nothing for a request they refuse.

The three public functions run as their own functions-framework processes, each on its own
base URL; functions-framework hands every path to the function, so
`POST {start_search URL}/start_search` reaches it just as the document's path says. Each
operation is fuzzed in positive mode (data the document allows) and negative mode (data it
forbids), with schemathesis' own checks (status codes, content types, headers and bodies as
documented; negative data refused) and this file's (no 5xx, every error a JSON ErrorBody, the
valid key never refused). A few requests carry no key, a key never stored, or a malformed one:
each must be a JSON 401.

Cheap by design: every search the stack accepts is cancelled at once (which also exercises
cancel on a live search) while the platform queues are held (see `platforms_held`), so no
accepted search runs a platform; its task id then joins the pool that status and cancel cases
draw from, so those answer 200 and 409 as well as 404. The key is this test's own, with limits
far above what it sends; a 429 would still be tolerated and counted (the quota is another
test's subject).

Generation is seeded (FANFUSE_FUZZ_SEED, default below; another seed explores other inputs),
and every failure is listed with the curl command that repeats it exactly (the key shown as
$FANFUSE_API_KEY or [Filtered], never itself).
The figures (requests per operation and mode, statuses) are printed and written to
`schemathesis-summary.json` in the test's tmp dir, for the closing note to quote.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok, Result
from schemathesis.errors import FailureGroup, InvalidSchema

from fanfuse.auth import keys
from fanfuse.http.openapi import document
from fanfuse.queue.port import AGGREGATE_QUEUE
from fanfuse.wire.models import ErrorBody, utcnow
from tests.support.e2e import schemathesis_cli
from tests.support.e2e.cloud import Cloud

if TYPE_CHECKING:
    from schemathesis.specs.openapi.schemas import OpenApiCase, OpenApiOperation

SEED = int(os.environ.get("FANFUSE_FUZZ_SEED", "20251010"))
EXAMPLES = {  # per operation and mode: start_search is where the input is richest
    "start_search": 200,
    "search_status": 120,
    "search_status_by_query": 100,
    "cancel_search": 130,
}
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
AT_LEAST = 1_000
"""Generated requests the issue asks for, across the public operations."""
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
KEY_SHOWN_AS = "$FANFUSE_API_KEY"
DRAIN_SECONDS = 120
TIMEOUT = 30


def target_of(operation_id: str) -> str:
    """The function an operation lives on: `search_status_by_query` is `search_status` too."""
    return operation_id.removesuffix("_by_query")


@dataclass
class Tally:
    """What was sent and answered, and what went wrong: the test's evidence."""

    key: str = field(repr=False)  # never shown in a failure (`fail` masks it in the curl too)
    requests: Counter[str] = field(default_factory=Counter)
    """Per `operation mode` (generated), and `auth` and `follow-up` (the requests this file
    adds: without a valid key, and the cancel of each accepted search)."""
    statuses: dict[str, Counter[int]] = field(default_factory=dict)
    accepted: list[str] = field(default_factory=list)
    """Task ids a 202 returned, in order."""
    failures: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time per `operation mode`."""

    def count(self, label: str, status: int) -> None:
        self.requests[label] += 1
        self.statuses.setdefault(label, Counter())[status] += 1

    def fail(self, label: str, problem: str, curl: str) -> None:
        self.failures.append(f"{label}: {problem}\n    {curl}".replace(self.key, KEY_SHOWN_AS))

    def generated(self) -> int:
        modes = {mode.value for mode in MODES}
        return sum(n for label, n in self.requests.items() if label.rpartition(" ")[2] in modes)

    def summary(self, seconds: float) -> dict[str, Any]:
        total: Counter[int] = Counter()
        for counter in self.statuses.values():
            total.update(counter)
        return {
            "seed": SEED,
            "seconds": round(seconds, 1),
            "generated": self.generated(),
            "requests": sum(self.requests.values()),
            "per_operation_and_mode": dict(sorted(self.requests.items())),
            "seconds_per_operation_and_mode": {k: round(v, 1) for k, v in self.seconds.items()},
            "statuses": {k: dict(sorted(v.items())) for k, v in sorted(self.statuses.items())},
            "status_totals": dict(sorted(total.items())),
            "server_errors": sum(n for status, n in total.items() if status >= 500),
            "accepted": len(self.accepted),
            "failures": len(self.failures),
        }


def error_body_problem(status: int, content_type: str, content: bytes) -> str | None:
    """Why an answer breaks the API's promises, or None: never a 5xx, and every error (any
    status outside 2xx) is `application/json` holding exactly an ErrorBody."""
    if status >= 500:
        return f"a server error, {status}"
    if status < 300:
        return None
    if content_type.split(";")[0].strip() != "application/json":
        return f"an error sent as {content_type!r}, not JSON"
    try:
        body = json.loads(content)
        ErrorBody.model_validate(body)
    except ValueError as exc:  # JSONDecodeError and pydantic's ValidationError are ValueErrors
        return f"an error body that is not an ErrorBody: {exc}"
    if not isinstance(body, dict) or set(body) != {"error", "message", "problems"}:
        return f"an error body with other fields: {content[:200]!r}"
    return None


class Harness:
    """Sends cases to the stack, checks each answer, and cancels what it accepted."""

    def __init__(self, cloud: Cloud, tally: Tally, operations: dict[str, OpenApiOperation]) -> None:
        self.cloud = cloud
        self.tally = tally
        self.operations = operations
        self.session = requests.Session()
        self.headers = {keys.API_KEY_HEADER: tally.key}

    def send(self, case: OpenApiCase, label: str) -> None:
        """A generated case, with the valid key; a 202 is cancelled at once."""
        response = self.check(case, label, self.headers)
        if response.status_code == 202:
            task_id = json.loads(response.content)["task_id"]
            self.tally.accepted.append(task_id)
            cancel = self.operations["cancel_search"].Case(body={"task_id": task_id})
            self.check(cancel, "follow-up", self.headers, expected={200, 409})

    def without_a_valid_key(self, case: OpenApiCase, headers: dict[str, str]) -> None:
        """No key, a key never stored, a malformed key: a JSON 401 saying how to authenticate."""
        response = self.check(case, "auth", headers, expected={401})
        if not (response.headers.get("www-authenticate") or [""])[0].startswith("Bearer"):
            self.tally.fail("auth", "a 401 without WWW-Authenticate", case.as_curl_command())

    def check(
        self,
        case: OpenApiCase,
        label: str,
        headers: dict[str, str],
        expected: set[int] | None = None,
    ) -> schemathesis.Response:
        """Send `case` to its function and record every way the answer breaks a promise: this
        file's (`error_body_problem`; `expected`, or else never a refusal of the valid key) and
        schemathesis' checks, each with the curl that repeats the request."""
        target = target_of(case.operation.definition.raw["operationId"])
        response = case.call(
            base_url=self.cloud.url(target), session=self.session, headers=headers, timeout=TIMEOUT
        )
        status = response.status_code
        self.tally.count(label, status)
        curl = case.as_curl_command(headers=dict(response.request.headers))
        content_type = (response.headers.get("content-type") or [""])[0]
        problem = error_body_problem(status, content_type, response.content)
        if expected is not None and status not in expected:
            problem = f"status {status}, expected {sorted(expected)}"
        elif expected is None and status in (401, 403):
            problem = f"the valid key was refused: {status}"
        if problem:
            self.tally.fail(label, problem, curl)
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except FailureGroup as exc:  # every check that failed, and the curl to repeat it
            self.tally.fail(label, str(exc).strip(), curl)
        return response


def with_known_id(case: OpenApiCase, task_id: str | None) -> OpenApiCase:
    """A positive status or cancel case aimed at a search that exists (when `task_id` is set),
    so that 200 and 409 are answered too, not only 404."""
    if task_id is None:
        return case
    if case.path_parameters and "task_id" in case.path_parameters:
        case.path_parameters["task_id"] = task_id
    elif isinstance(case.body, dict) and "task_id" in case.body:
        case.body["task_id"] = task_id
    else:
        case.query = {**(case.query or {}), "task_id": task_id}
    return case


def read(result: Result[OpenApiOperation, InvalidSchema]) -> OpenApiOperation:
    """An operation of the document: one that schemathesis cannot read fails the test."""
    assert isinstance(result, Ok), result.err()
    return result.ok()


def fuzz(
    operation: OpenApiOperation,
    mode: GenerationMode,
    send: Callable[[OpenApiCase], None],
    known: Iterable[str],
) -> None:
    """Run `max_examples` generated cases of one operation in one mode through `send`."""
    cases = operation.as_strategy(generation_mode=mode)
    pool = sorted(known)
    aim = st.none() | st.sampled_from(pool) if pool and mode.is_positive else st.none()

    @hypothesis.seed(SEED)
    @settings(
        max_examples=EXAMPLES[operation.definition.raw["operationId"]],
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases, task_id=aim)
    def run(case: OpenApiCase, task_id: str | None) -> None:
        send(with_known_id(case, task_id))

    run()


def valid_cases(operations: dict[str, OpenApiOperation], task_id: str) -> list[OpenApiCase]:
    """One request per operation that a valid key would get answered (202, or 200 or 409 on
    `task_id`): without one, each must be a 401 all the same."""
    return [
        operations["start_search"].Case(body={"query": "electrons", "platform": "docs"}),
        operations["search_status"].Case(path_parameters={"task_id": task_id}),
        operations["search_status_by_query"].Case(query={"task_id": task_id}),
        operations["cancel_search"].Case(body={"task_id": task_id}),
    ]


@contextmanager
def platforms_held(cloud: Cloud) -> Iterator[None]:
    """Every platform queue paused while the fuzz runs, then resumed and drained.

    A search accepted here is cancelled at once, and its platform tasks are delivered only
    after the fuzz: each then finds its search cancelled and is dropped. Were they delivered
    meanwhile, each delivery's claim would transact on the task document together with the
    cancel (and a finishing platform's fan-in), and the Firestore emulator resolves such
    read-then-write transactions in several processes only by its lock timeout: enough of them
    at once exhaust every retry and the cancel answers 503 (production Firestore aborts one of
    them instead; docs/DESIGN.md, "Transactions per task are serialized within a process").
    Draining afterwards leaves the queues empty for the tests that follow.
    """
    client = cloud.stack.tasks.client()
    held = [cloud.queue(p) for p in cloud.addresses.queues if p != AGGREGATE_QUEUE]
    for name in held:
        client.pause_queue(name=name, timeout=5)
    try:
        yield
    finally:
        for name in held:
            client.resume_queue(name=name, timeout=5)
        cloud.wait_until(
            lambda: not any(list(client.list_tasks(parent=name, timeout=5)) for name in held),
            timeout=DRAIN_SECONDS,
            what="the platform queues drained",
        )


def stored_key(cloud: Cloud) -> str:
    """This test's own key, with limits far above what it sends (the quota is not its subject)."""
    plaintext, record = keys.new_key(
        "fuzz", "schemathesis", rate_per_minute=1_000_000, max_in_flight=10_000, now=utcnow()
    )
    cloud.store.put_key(record)
    return plaintext


def task_ids_written(cloud: Cloud, log_from: int) -> set[str]:
    """Every search that has a document, or had a write logged since `log_from` (a byte offset)."""
    ids = {snap.id for snap in cloud.db.collection("searches").stream()}
    with cloud.write_log.open("rb") as log:
        log.seek(log_from)
        for line in log.read().decode().splitlines():
            doc = json.loads(line)["doc"]
            if doc.startswith("searches/"):
                ids.add(doc.split("/")[1])
    return ids


@pytest.mark.long(seconds=300)
def test_generated_requests_get_no_5xx_json_errors_and_write_nothing_when_refused(
    e2e: Cloud, tmp_path: Path
) -> None:
    began = time.monotonic()
    log_from = e2e.write_log.stat().st_size if e2e.write_log.exists() else 0
    tally = Tally(key=stored_key(e2e))
    schema = schemathesis.openapi.from_dict(document(), config=schemathesis.Config())
    operations = {
        op.definition.raw["operationId"]: op
        for op in (read(result) for result in schema.get_all_operations())
        if op.definition.raw["operationId"] in EXAMPLES
    }
    assert set(operations) == set(EXAMPLES)  # the document still names the public calls
    harness = Harness(e2e, tally, operations)

    # start_search first: what it accepts becomes the known ids the other calls are aimed at.
    with platforms_held(e2e):
        for operation_id, operation in operations.items():
            for mode in MODES:
                label = f"{operation_id} {mode.value}"
                started = time.monotonic()
                fuzz(operation, mode, partial(harness.send, label=label), tally.accepted)
                tally.seconds[label] = time.monotonic() - started
        drain_from = time.monotonic()
    tally.seconds["drain"] = time.monotonic() - drain_from

    never_stored, _ = keys.new_key("fuzz", "never stored", None, None, utcnow())
    wrong = [{}, {keys.API_KEY_HEADER: never_stored}, {keys.API_KEY_HEADER: "let me in"}]
    for case in valid_cases(operations, tally.accepted[0] if tally.accepted else "0" * 32):
        for headers in wrong:
            harness.without_a_valid_key(case, headers)

    summary = tally.summary(time.monotonic() - began)
    (tmp_path / "schemathesis-summary.json").write_text(json.dumps(summary, indent=2))
    print(f"\nschemathesis summary: {json.dumps(summary)}")

    failures = tally.failures
    assert not failures, f"{len(failures)} failures (first 20):\n" + "\n".join(failures[:20])
    assert tally.generated() >= AT_LEAST, summary
    assert summary["server_errors"] == 0, summary
    assert tally.accepted, summary  # the fuzz reached past validation, not only its refusals
    assert len(set(tally.accepted)) == len(tally.accepted)
    # Nothing written for a refused request: every search with a document or a logged write
    # is one a 202 returned, and every 202 wrote its search.
    written = task_ids_written(e2e, log_from)
    assert written == set(tally.accepted), sorted(written ^ set(tally.accepted))[:10]


@pytest.mark.parametrize("path", ["/search_status/%0A", "/robots.txt", "/favicon.ico"])
def test_paths_functions_framework_cannot_route_are_json_404s(e2e: Cloud, path: str) -> None:
    """What the fuzz found: functions-framework's `/<path:path>` matches no path holding a
    newline, and it answers `/robots.txt` and `/favicon.ico` itself, with werkzeug's HTML page
    (until functions/main.py registered `cloud.routing_error`)."""
    for target in ("start_search", "search_status", "cancel_search"):
        response = e2e.http.get(e2e.url(target) + path)
        assert response.status_code == 404, (target, response.text)
        assert error_body_problem(404, response.headers["Content-Type"], response.content) is None


CLI_EXAMPLES = 5
"""Per operation and phase for the CLI's runs: the Python-driven fuzz above sends the volume."""
CLI_SECONDS = 600


@pytest.mark.long(seconds=150)
def test_schemathesis_checks_all_in_every_phase_finds_nothing_against_the_functions(
    e2e: Cloud, tmp_path: Path
) -> None:
    """schemathesis' own CLI, `--checks all`, every phase, against the functions from the
    document they serve (`{search_status URL}/openapi.json`): their platforms and limits
    written in, each path's server the function that answers it, so the stateful phase follows
    the links from a started search to its status and its cancel across three functions. The
    platform queues are held as above; the key is this test's own."""
    key = stored_key(e2e)
    schema = f"{e2e.url('search_status')}/openapi.json"
    runs = {}
    with platforms_held(e2e):
        for phases in (schemathesis_cli.UNIT_PHASES, "stateful"):
            runs[phases] = schemathesis_cli.run(
                schema,
                key,
                tmp_path,
                phases,
                max_examples=CLI_EXAMPLES,
                seed=str(SEED),
                timeout=CLI_SECONDS,
            )
    unit, stateful = runs[schemathesis_cli.UNIT_PHASES], runs["stateful"]
    assert unit.generated() > 0 and not unit.failed(), unit.output[-8000:]
    for phase in ("Examples", "Coverage", "Fuzzing"):
        assert unit.phase_passed(phase), (phase, unit.output[-4000:])
    assert "API Links:" in stateful.output and not stateful.failed(), stateful.output[-8000:]
    calls = schemathesis_cli.stateful_calls(tmp_path)
    cancels = calls[("POST", "/cancel_search", 200)] + calls[("POST", "/cancel_search", 409)]
    assert cancels > 0, sorted(calls.items())  # a started search's real task id, cancelled
