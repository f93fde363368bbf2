"""The two wrappers of cloud.py map errors to answers by type, without emulators; the public
targets authenticate before they call the service.

The HTTP contract itself is tested end to end (tests/e2e/test_e2e_http.py); this pins what the
emulators cannot easily provoke: a 5xx error of the service, and an unexpected exception.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import flask
import pytest
from pydantic import SecretStr
from werkzeug.exceptions import NotFound
from werkzeug.routing import RequestRedirect

from fanfuse.auth import keys
from fanfuse.auth.task_deliveries import SIGNATURE_HEADER
from fanfuse.fronts import functions
from fanfuse.queue.port import AggregateMessage, PlatformMessage
from fanfuse.runtimes import cloud
from fanfuse.service.admission import Ticket
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.errors import QueueUnavailable, StoreUnavailable, TaskExpired, UnknownPlatform
from fanfuse.wire.models import Caller, TaskView, utcnow
from tests.support.fakes import task_view
from tests.support.signing import task_signature

SECRET = "wrapper-tests"
KEY, RECORD = keys.new_key("alice", "", 5, None, utcnow())
AS_ALICE = {keys.API_KEY_HEADER: KEY}


class _Registry:
    def names(self) -> list[str]:
        return ["docs"]


class _Catalog:
    """What a function's document reads of the service's platform catalog."""

    registry = _Registry()

    def available(self) -> list[str]:
        return ["docs"]

    def runnable(self) -> list[str]:
        return ["docs"]


class _Service:
    """Raises `error` from every call the targets make (recording what it was called with);
    its store holds alice's key."""

    def __init__(self, error: Exception, owner: str | None = None) -> None:
        self.error = error
        self.owner = owner
        self.settings = Settings()
        self.store = SqliteStore(":memory:")
        self.store.put_key(RECORD)
        self.calls: list[tuple[str, Any]] = []
        self.catalog = _Catalog()

    def admit(self, caller: Caller | None) -> Ticket:
        self.calls.append(("admit", caller))
        return Ticket(caller=caller, at=utcnow())

    def start(self, payload: Any, *, ticket: Ticket) -> Any:
        self.calls.append(("start", ticket.caller))
        raise self.error

    def status(self, task_id: str) -> TaskView:
        self.calls.append(("status", task_id))
        return task_view(task_id, self.owner)

    def available(self) -> list[str]:
        return ["docs"]

    def cancel(self, task_id: str) -> TaskView:
        self.calls.append(("cancel", task_id))
        raise self.error

    async def run_platform(self, message: PlatformMessage) -> str:
        raise self.error

    def aggregate(self, message: AggregateMessage) -> str:
        raise self.error


@pytest.fixture
def app() -> Iterator[flask.Flask]:
    cloud._settings = Settings(tasks_hmac_secret=SecretStr(SECRET))
    yield flask.Flask("wrappers")
    cloud._service = None
    cloud._settings = None
    cloud._authenticator = None


def call(
    app: flask.Flask,
    target: Callable[[flask.Request], flask.Response],
    error: Exception | _Service,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> flask.Response:
    """`body` to `target`, signed as the local queue signs task deliveries."""
    service = error if isinstance(error, _Service) else _Service(error)
    # a double with the service's methods the targets call, not a SearchService
    cloud._service = service  # type: ignore[assignment]
    data = json.dumps(body)
    signature = task_signature(target.__name__, data.encode(), SECRET)
    signed = {SIGNATURE_HEADER: signature, **(headers or {})}
    with app.test_request_context(
        "/t1", method=method, data=data, content_type="application/json", headers=signed
    ):
        return target(flask.request)


MESSAGE = {"task_id": "t1", "platform": "docs"}
FROM_TASKS = {functions.TASK_NAME_HEADER: "projects/p/locations/l/queues/q/tasks/t1--docs"}


def test_public_target_answers_the_services_5xx_and_503_for_anything_else(
    app: flask.Flask,
) -> None:
    queue = call(
        app, functions.start_search, QueueUnavailable("no queue"), {"query": "q"}, AS_ALICE
    )
    assert queue.status_code == 503 and queue.get_json()["error"] == "queue_unavailable"
    bug = call(app, functions.start_search, RuntimeError("boom"), {"query": "q"}, AS_ALICE)
    assert bug.status_code == 503 and bug.get_json() == {
        "error": "unavailable",
        "message": "start_search is temporarily unavailable; try again",
        "problems": [],
    }


def test_a_stalled_store_is_503_with_retry_after_for_callers_and_cloud_tasks(
    app: flask.Flask,
) -> None:
    stalled = StoreUnavailable("Firestore did not answer get_task in time", retry_after_s=2.5)
    for target, body, headers in (
        (functions.start_search, {"query": "q"}, AS_ALICE),
        (functions.run_platform, MESSAGE, FROM_TASKS),
    ):
        answer = call(app, target, stalled, body, headers)
        assert answer.status_code == 503 and answer.get_json()["error"] == "store_unavailable"
        assert answer.headers["Retry-After"] == "3"  # whole seconds, rounded up


def test_task_target_drops_a_permanent_error_only_for_cloud_tasks(app: flask.Flask) -> None:
    direct = call(app, functions.run_platform, UnknownPlatform("docs"), MESSAGE)
    assert direct.status_code == 400 and direct.get_json()["problems"] == [
        {"field": "platform", "problem": "'docs' is not a platform of this search"}
    ]
    dropped = call(app, functions.run_platform, UnknownPlatform("docs"), MESSAGE, FROM_TASKS)
    assert dropped.status_code == 200
    assert dropped.get_json()["outcome"] == "dropped"
    assert dropped.get_json()["error"]["error"] == "invalid_request"


@pytest.mark.parametrize("error", [QueueUnavailable("no queue"), ConnectionError("reset")])
def test_task_target_answers_5xx_for_a_retryable_failure(
    app: flask.Flask, error: Exception
) -> None:
    for target, body in (
        (functions.run_platform, MESSAGE),
        (functions.aggregate, {"task_id": "t1"}),
    ):
        answer = call(app, target, error, body, FROM_TASKS)
        assert answer.status_code == 503, answer.get_json()


def test_public_targets_authenticate_before_calling_the_service(app: flask.Flask) -> None:
    for target, method in (
        (functions.start_search, "POST"),
        (functions.search_status, "GET"),
        (functions.cancel_search, "POST"),
    ):
        service = _Service(QueueUnavailable("no queue"))
        for headers in ({}, {keys.API_KEY_HEADER: "ff_nonsense"}):
            answer = call(app, target, service, {"task_id": "t1"}, headers, method)
            assert answer.status_code == 401, answer.get_json()
            assert answer.get_json()["error"] == "unauthorized"
            assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        assert service.calls == []  # nothing read, nothing written


def test_start_search_admits_the_keys_caller_then_hands_it_to_the_service(
    app: flask.Flask,
) -> None:
    service = _Service(QueueUnavailable("no queue"))
    call(app, functions.start_search, service, {"query": "q"}, AS_ALICE)
    alice = Caller(subject="key:alice", via="api_key", key_id=RECORD.key_id, rate_per_minute=5)
    assert service.calls == [("admit", alice), ("start", alice)]


def test_someone_elses_search_is_404_and_is_not_cancelled(app: flask.Flask) -> None:
    theirs = _Service(QueueUnavailable("no queue"), owner="key:bob")
    status = call(app, functions.search_status, theirs, {}, AS_ALICE, "GET")
    assert status.status_code == 404 and status.get_json()["error"] == "not_found"
    cancel = call(app, functions.cancel_search, theirs, {"task_id": "t1"}, AS_ALICE)
    assert cancel.status_code == 404
    assert theirs.calls == [("status", "t1"), ("status", "t1")]  # never ("cancel", ...)
    mine = _Service(QueueUnavailable("no queue"), owner="key:alice")
    assert call(app, functions.search_status, mine, {}, AS_ALICE, "GET").status_code == 200


class _Expired(_Service):
    """A search past its `expires_at`: the service's status raises TaskExpired."""

    def status(self, task_id: str) -> TaskView:
        self.calls.append(("status", task_id))
        raise TaskExpired(task_id, self.owner)


def test_an_expired_search_is_410_to_its_owner_and_404_to_anyone_else(app: flask.Flask) -> None:
    mine = _Expired(QueueUnavailable("no queue"), owner="key:alice")
    status = call(app, functions.search_status, mine, {}, AS_ALICE, "GET")
    assert status.status_code == 410 and status.get_json()["error"] == "expired"
    assert "results" not in status.get_json() and "queries" not in status.get_json()
    cancel = call(app, functions.cancel_search, mine, {"task_id": "t1"}, AS_ALICE)
    assert cancel.status_code == 410
    theirs = _Expired(QueueUnavailable("no queue"), owner="key:bob")
    for target, body in (
        (functions.search_status, {}),
        (functions.cancel_search, {"task_id": "t1"}),
    ):
        answer = call(app, target, theirs, body, AS_ALICE, "GET" if body == {} else "POST")
        assert answer.status_code == 404 and answer.get_json()["error"] == "not_found"
    assert ("cancel", "t1") not in mine.calls + theirs.calls


def test_a_revoked_key_is_403(app: flask.Flask) -> None:
    service = _Service(QueueUnavailable("no queue"))
    service.store.put_key(keys.revoked(RECORD, utcnow()))
    answer = call(app, functions.start_search, service, {"query": "q"}, AS_ALICE)
    assert answer.status_code == 403 and answer.get_json()["error"] == "forbidden"
    assert service.calls == []


@pytest.mark.parametrize(
    ("path", "task_id"),
    [("/t1", "t1"), ("/search_status/t1", "t1"), ("/search_status?task_id=t2", "t2")],
)
def test_status_reads_the_task_id_after_the_functions_own_name(
    app: flask.Flask, path: str, task_id: str
) -> None:
    service = _Service(RuntimeError("unused"), owner="key:alice")
    # a double with the service's methods the targets call, not a SearchService
    cloud._service = service  # type: ignore[assignment]
    with app.test_request_context(path, method="GET", headers=AS_ALICE):
        answer = functions.search_status(flask.request)
    assert answer.status_code == 200 and service.calls == [("status", task_id)]


def test_status_without_a_task_id_is_400_even_under_the_functions_name(app: flask.Flask) -> None:
    """functions-framework keeps `/search_status` in the path; it is not a task id."""
    # a double with the service's methods the targets call, not a SearchService
    cloud._service = _Service(RuntimeError("unused"))  # type: ignore[assignment]
    with app.test_request_context("/search_status", method="GET", headers=AS_ALICE):
        answer = functions.search_status(flask.request)
    assert answer.status_code == 400
    assert answer.get_json()["problems"] == [{"field": "task_id", "problem": "field required"}]


def test_what_functions_framework_refuses_itself_is_answered_as_json(app: flask.Flask) -> None:
    """Its routing matches no path with a newline and 404s `/robots.txt` itself (HTML, were it
    not for `routing_error`, which functions/main.py registers)."""
    with app.test_request_context("/search_status/%0A"):
        answer = functions.routing_error(NotFound())
    assert isinstance(answer, flask.Response) and answer.status_code == 404
    assert answer.mimetype == "application/json"
    body = answer.get_json()
    assert body["error"] == "not_found" and body["problems"] == []
    assert body["message"].startswith("The requested URL was not found")
    redirect = RequestRedirect("http://127.0.0.1/search_status/")
    assert functions.routing_error(redirect) is redirect  # not an error: left to werkzeug


ORIGIN = "http://127.0.0.1:8000"


def test_public_targets_answer_cors_only_for_the_listed_origins(app: flask.Flask) -> None:
    """A browser app on another origin (examples/web-app) may call the API only when the
    deployment lists its origin: the preflight is 204 with the headers it asks about, before any
    credential is read (browsers send none with it); the answer itself carries the origin. Any
    other origin gets no CORS header, and its preflight is the plain 405 of an unknown method."""
    cloud._settings = Settings(tasks_hmac_secret=SecretStr(SECRET), cors_origins=[ORIGIN])
    service = _Service(QueueUnavailable("no queue"))
    preflight = call(app, functions.start_search, service, {}, {"Origin": ORIGIN}, "OPTIONS")
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert preflight.headers["Access-Control-Allow-Methods"] == "POST"
    assert "Authorization" in preflight.headers["Access-Control-Allow-Headers"]
    assert preflight.headers["Vary"] == "Origin"
    assert service.calls == []
    answer = call(
        app, functions.start_search, service, {"query": "q"}, {**AS_ALICE, "Origin": ORIGIN}
    )
    assert answer.status_code == 503
    assert answer.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert answer.headers["Access-Control-Expose-Headers"] == "Location, Retry-After"
    status = call(app, functions.search_status, service, {}, {"Origin": ORIGIN}, "OPTIONS")
    assert status.headers["Access-Control-Allow-Methods"] == "GET, HEAD"

    other = {"Origin": "http://127.0.0.1:9999"}
    refused = call(app, functions.start_search, service, {}, other, "OPTIONS")
    assert refused.status_code == 405
    assert not any(h.startswith("Access-Control-") for h, _ in refused.headers.items())
    plain = call(app, functions.start_search, service, {"query": "q"}, {**AS_ALICE, **other})
    assert "Access-Control-Allow-Origin" not in plain.headers
