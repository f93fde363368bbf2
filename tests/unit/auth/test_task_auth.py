"""The task targets accept only the queue's deliveries: an HMAC of the body locally, Cloud Tasks'
OIDC token in production, nothing at all when neither is configured.

`verify_delivery` is tested on its own, then through cloud.py's `task_target` wrapper with a
service that records calls, so a refused delivery is seen to reach nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import flask
import pytest
from pydantic import SecretStr
from pytest_httpserver import HTTPServer
from werkzeug.datastructures import Headers

from fanfuse.auth import certs
from fanfuse.auth.task_deliveries import SIGNATURE_HEADER, signature_for, verify_delivery
from fanfuse.fronts import functions
from fanfuse.queue.port import AggregateMessage, PlatformMessage
from fanfuse.runtimes import cloud
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.wire.errors import FanfuseError, Forbidden, Unauthorized
from tests.support.signing import GOOGLE_ISSUER, KeySet, claims, make_key, task_signature

SECRET = "local-stack-secret"
BODY = b'{"task_id": "t1", "platform": "docs"}'
URL = "https://run-platform-abc-uc.a.run.app"
SA = "fanfuse-tasks@demo-fanfuse.iam.gserviceaccount.com"
LOCAL = Settings(tasks_hmac_secret=SecretStr(SECRET))
NOTHING = Settings(tasks_hmac_secret=None, tasks_service_account=None)


def deliver(
    headers: dict[str, str],
    settings: Settings,
    target: str = "run_platform",
    now: float | None = None,
) -> None:
    """Check a delivery of BODY to `target` (headers looked up as Flask does)."""
    verify_delivery(target, Headers(headers), BODY, settings, now)


def signed(body: bytes = BODY, secret: str = SECRET, target: str = "run_platform") -> str:
    return task_signature(target, body, secret)


def refusal(error: type[FanfuseError], headers: dict[str, str], settings: Settings) -> str:
    with pytest.raises(error) as caught:
        deliver(headers, settings)
    return str(caught.value)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- the check on its own ----------------------------------------------------------------------


def test_a_body_signed_with_the_secret_is_accepted() -> None:
    deliver({SIGNATURE_HEADER: signed()}, LOCAL)
    deliver({SIGNATURE_HEADER.lower(): signed()}, LOCAL)


NOT_THE_FORM = "is not `t=<not before>,e=<expires>,sha256=<hex>`"


def stretched(signature: str, expires: int) -> str:
    """The same MAC with another expiry written in: what a replayer would try."""
    t, _, mac = signature.split(",")
    return f"{t},e={expires},{mac}"


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({}, f"no {SIGNATURE_HEADER} header"),
        ({SIGNATURE_HEADER: ""}, f"no {SIGNATURE_HEADER} header"),
        ({SIGNATURE_HEADER: signed(secret="another-secret")}, "does not match the body and target"),
        ({SIGNATURE_HEADER: signed(BODY + b" ")}, "does not match the body and target"),  # altered
        ({SIGNATURE_HEADER: signed(target="aggregate")}, "does not match the body and target"),
        ({SIGNATURE_HEADER: stretched(signed(), 2**35)}, "does not match the body and target"),
        ({SIGNATURE_HEADER: signed().split(",")[-1]}, NOT_THE_FORM),  # the old `sha256=` form
        ({SIGNATURE_HEADER: "t=1,e=2,sha256=" + "[" * 64}, NOT_THE_FORM),
        ({"Authorization": "Bearer a.b.c"}, f"no {SIGNATURE_HEADER} header"),
    ],
)
def test_a_missing_or_wrong_signature_is_unauthorized(headers: dict[str, str], why: str) -> None:
    message = refusal(Unauthorized, headers, LOCAL)
    assert message.startswith("run_platform accepts only Cloud Tasks deliveries: ")
    assert message.endswith(why)
    assert SECRET not in message


def test_a_signature_is_valid_only_inside_its_window() -> None:
    """Signed at 1,000,000 for 30 minutes: refused before (a deadline read from the queue
    early), accepted within (the queue's retries), refused after (a replay)."""
    settings = LOCAL.model_copy(update={"ttl_minutes": 30.0})
    at = datetime.fromtimestamp(1_000_000, UTC)
    headers = {SIGNATURE_HEADER: signature_for("run_platform", BODY, SECRET, settings, at)}
    assert "not valid yet" in refusal_at(headers, 1_000_000 - 31)
    for now in (1_000_000 - 30, 1_000_000, 1_000_000 + 1800 + 30):
        deliver(headers, settings, now=now)
    assert refusal_at(headers, 1_000_000 + 1800 + 31).endswith("has expired")


def refusal_at(headers: dict[str, str], now: float) -> str:
    with pytest.raises(Unauthorized) as caught:
        deliver(headers, LOCAL, now=now)
    return str(caught.value)


@pytest.mark.parametrize("settings", [NOTHING, Settings(tasks_hmac_secret=SecretStr(""))])
def test_with_nothing_configured_every_delivery_is_refused(settings: Settings) -> None:
    for headers in ({}, {SIGNATURE_HEADER: signed(secret="")}, {"Authorization": "Bearer x"}):
        message = refusal(Forbidden, headers, settings)
        assert "FANFUSE_TASKS_SERVICE_ACCOUNT" in message
        assert "FANFUSE_TASKS_HMAC_SECRET" in message


@pytest.fixture
def production(server: HTTPServer) -> Iterator[tuple[Settings, Any]]:
    """Settings for OIDC deliveries, Google's keys served locally; and the signing key."""
    key = make_key("g1")
    keys = KeySet(server, "/oauth2/v1/certs")
    keys.publish(key)
    settings = Settings(
        tasks_service_account=SA,
        function_urls={"run_platform": URL},
        google_certs_url=keys.url,
    )
    certs.CERTS.clear()
    yield settings, key
    certs.CERTS.clear()


def test_in_production_the_tasks_service_accounts_token_is_required(
    production: tuple[Settings, Any],
) -> None:
    settings, key = production
    account = {"email": SA, "email_verified": True}
    token = key.sign(claims(GOOGLE_ISSUER, URL, **account))
    deliver(bearer(token), settings)

    assert "no Authorization: Bearer token" in refusal(Unauthorized, {}, settings)
    hmac_only = {SIGNATURE_HEADER: signed(secret="")}  # no secret configured: it means nothing
    assert "no Authorization: Bearer token" in refusal(Unauthorized, hmac_only, settings)
    elsewhere = key.sign(claims(GOOGLE_ISSUER, URL + "/aggregate", **account))
    assert "audience" in refusal(Unauthorized, bearer(elsewhere), settings)
    stranger = key.sign(claims(GOOGLE_ISSUER, URL, email="me@example.com", email_verified=True))
    assert "not issued to the tasks service account" in refusal(
        Forbidden, bearer(stranger), settings
    )

    # Deployed, a function is not told its own URL: the token names the host it was sent to.
    unnamed = settings.model_copy(update={"function_urls": {}})
    host = URL.removeprefix("https://")
    deliver({**bearer(token), "Host": host}, unnamed)
    assert "audience" in refusal(Unauthorized, {**bearer(token), "Host": "elsewhere"}, unnamed)
    assert "no Host header" in refusal(Unauthorized, bearer(token), unnamed)


# -- through the wrapper -----------------------------------------------------------------------


class _Recording:
    """Records every call the task targets make; answers as a healthy service would."""

    def __init__(self) -> None:
        self.calls: list[PlatformMessage | AggregateMessage] = []

    async def run_platform(self, message: PlatformMessage) -> str:
        self.calls.append(message)
        return "succeeded"

    async def aggregate(self, message: AggregateMessage) -> str:
        self.calls.append(message)
        return "completed"


@pytest.fixture
def service() -> Iterator[_Recording]:
    recording = _Recording()
    # a double with the service's methods the targets call, not a SearchService
    cloud._service = recording  # type: ignore[assignment]
    cloud._settings = LOCAL
    yield recording
    cloud._service = None
    cloud._settings = None


def post(target: Any, body: dict[str, Any], headers: dict[str, str]) -> flask.Response:
    app = flask.Flask("task-auth")
    data = json.dumps(body)
    with app.test_request_context(
        "/", method="POST", data=data, content_type="application/json", headers=headers
    ):
        answer: flask.Response = target(flask.request)
        return answer


DELIVERIES = [
    (functions.run_platform, {"task_id": "t1", "platform": "docs"}),
    (functions.aggregate, {"task_id": "t1", "deadline": True}),
]
FROM_TASKS = {functions.TASK_NAME_HEADER: "projects/p/locations/l/queues/q/tasks/t1--x"}


def other_target(target: Any) -> str:
    return "aggregate" if target.__name__ == "run_platform" else "run_platform"


@pytest.mark.parametrize(("target", "body"), DELIVERIES)
def test_the_wrapper_refuses_unsigned_deliveries_before_anything_runs(
    service: _Recording, target: Any, body: dict[str, Any]
) -> None:
    data = json.dumps(body).encode()
    for headers in (
        {},
        FROM_TASKS,  # the task-name header proves nothing: still 401, never a 200 "dropped"
        {**FROM_TASKS, SIGNATURE_HEADER: task_signature(target.__name__, data, "guessed")},
        {SIGNATURE_HEADER: signed(json.dumps({**body, "task_id": "t2"}).encode())},
        {SIGNATURE_HEADER: signed(data, target=other_target(target))},
        {SIGNATURE_HEADER: task_signature(target.__name__, data, SECRET, not_before=0)},
    ):
        answer = post(target, body, headers)
        assert answer.status_code == 401, answer.get_json()
        assert answer.get_json()["error"] == "unauthorized"
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert service.calls == []


@pytest.mark.parametrize(("target", "body"), DELIVERIES)
def test_the_wrapper_refuses_everything_when_nothing_is_configured(
    service: _Recording, target: Any, body: dict[str, Any]
) -> None:
    cloud._settings = NOTHING
    answer = post(target, body, {SIGNATURE_HEADER: signed(json.dumps(body).encode())})
    assert answer.status_code == 403 and answer.get_json()["error"] == "forbidden"
    assert service.calls == []


@pytest.mark.parametrize(("target", "body"), DELIVERIES)
def test_the_wrapper_runs_a_signed_delivery(
    service: _Recording, target: Any, body: dict[str, Any]
) -> None:
    signature = signed(json.dumps(body).encode(), target=target.__name__)
    answer = post(target, body, {SIGNATURE_HEADER: signature})
    assert answer.status_code == 200, answer.get_json()
    assert len(service.calls) == 1 and service.calls[0].task_id == "t1"


def test_the_service_is_built_on_the_settings_the_check_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One `FANFUSE_*` read per process, shared by the delivery check and the service (built
    while holding its own lock, so the settings must not need that lock: no deadlock)."""
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:9")  # never contacted here
    monkeypatch.setenv("FANFUSE_TASKS_HMAC_SECRET", SECRET)
    monkeypatch.setattr(cloud, "_service", None)
    monkeypatch.setattr(cloud, "_settings", None)
    built: list[SearchService] = []
    worker = threading.Thread(target=lambda: built.append(cloud.service()), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert built, "cloud.service() did not return"
    assert built[0].settings is cloud.settings()
    assert cloud.settings().tasks_hmac_secret == SecretStr(SECRET)
