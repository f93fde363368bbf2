"""`fanfuse.support.redact` and the shared points that apply it: the runner, `ProviderError`,
`CallRecord`, the error-body helpers, and the log redaction the entry points install."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from fanfuse.net.policy import CallPolicy
from fanfuse.net.runner import RequestSpec, Runner
from fanfuse.platforms.parsing import error_detail, load_json
from fanfuse.settings import Settings
from fanfuse.support.redact import (
    MASK,
    SecretFilter,
    credentials,
    install_log_redaction,
    is_secret_name,
    redact,
    redact_record,
    redact_url,
    remember,
)
from fanfuse.wire.errors import ProviderError, Unauthorized
from fanfuse.wire.models import CallRecord, ErrorBody

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def restored_log_factory() -> Iterator[None]:
    factory = logging.getLogRecordFactory()
    logging.setLogRecordFactory(logging.LogRecord)
    yield
    logging.setLogRecordFactory(factory)


# -- what a secret is -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("key", True),
        ("api_key", True),
        ("X-Api-Key", True),
        ("X-Subscription-Token", True),
        ("Authorization", True),
        ("FANFUSE_TASKS_HMAC_SECRET", True),
        ("FANFUSE_GOOGLE_API_KEY", True),
        ("signature", True),
        ("q", False),
        ("max_tokens", False),
        ("FANFUSE_CONTENT_TOKEN_BUDGET", False),
        ("monkey", False),
    ],
)
def test_names_that_hold_secrets(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_a_remembered_value_is_masked_in_every_spelling() -> None:
    value = "rem+ember/ed=secret-1"
    remember(value)
    text = f"a {value} b {value.replace('+', '%2B').replace('/', '%2F').replace('=', '%3D')} c"
    text += " " + json.dumps({"echo": value}) + " " + value.replace("+", "%2B").replace("=", "%3D")
    assert "ember" not in redact(text)
    assert redact(text).startswith(f"a {MASK} b {MASK} c")


def test_secret_named_environment_values_are_masked_and_others_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FANFUSE_TASKS_HMAC_SECRET", "hmac-from-env-42")
    monkeypatch.setenv("FANFUSE_CONTENT_TOKEN_BUDGET", "12345678")
    monkeypatch.setenv("FANFUSE_SHORT_API_KEY", "short")  # too short to mask by value
    text = redact("sig over hmac-from-env-42, budget 12345678, short")
    assert text == f"sig over {MASK}, budget 12345678, short"


def test_extra_secrets_given_to_redact_are_masked() -> None:
    assert redact("token abcdefgh1234 here", ["abcdefgh1234"]) == f"token {MASK} here"


@pytest.mark.parametrize(
    ("text", "kept", "gone"),
    [
        ("Authorization: Bearer tok-by-shape-1", "Authorization: Bearer ", "tok-by-shape"),
        ('{"X-Api-Key": "xk-by-shape-22"}', '"X-Api-Key": "', "xk-by-shape"),
        ("request headers: x-api-key=xk-by-shape-3", "x-api-key=", "xk-by-shape"),
        ("sent bearer abcdefghijklmnop to it", "bearer ", "abcdefghij"),
        ("GET https://h/s?q=cats&key=k-by-shape-4&num=10", "?q=cats&key=", "k-by-shape"),
        ("at http://user:pw-by-shape@host/x failed", "http://***@host/x", "pw-by-shape"),
        ("key ff_abc123_s3cr3tS3cr3tS3cr3tS3cr3t rejected", "ff_abc123_", "s3cr3t"),
        ("token eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln ok", "token ", "eyJ"),
    ],
)
def test_credentials_are_masked_by_shape(text: str, kept: str, gone: str) -> None:
    clean = redact(text)
    assert kept in clean and gone not in clean and MASK in clean


def test_ordinary_text_is_left_alone() -> None:
    text = "HTTP 500: upstream timed out for q=cats&num=10 (basic search, 3 keys tried)"
    assert redact(text) == text
    assert redact(redact("Authorization: Bearer abcdefghijk")) == redact(
        "Authorization: Bearer abcdefghijk"
    )


def test_redact_url_masks_userinfo_and_key_parameters_and_keeps_the_rest() -> None:
    url = "https://me:pw-url-1@api.example/v1/search?q=a+b%2Fc&key=k-url-12&cx=42&apikey=z"
    shown = redact_url(url, {"cx"})
    assert (
        shown
        == f"https://{MASK}@api.example/v1/search?q=a+b%2Fc&key={MASK}&cx={MASK}&apikey={MASK}"
    )


def test_credentials_of_a_request() -> None:
    found = credentials(
        "http://u:pw-cred-1@h/",
        {"Authorization": "Bearer tok-cred-1", "X-Subscription-Token": "sub-cred-1", "Accept": "x"},
        [("q", "cats"), ("key", "k-cred-1"), ("cx", "cx-cred-1"), ("api_key", {"nested": 1})],
        {"cx"},
    )
    assert sorted(found) == ["cx-cred-1", "k-cred-1", "pw-cred-1", "sub-cred-1", "tok-cred-1"]


async def test_the_runner_remembers_a_key_sent_in_a_json_body(
    server: HTTPServer, runner: Runner
) -> None:
    server.expect_request("/b", method="POST").respond_with_data("{}")
    spec = RequestSpec(url=server.url_for("/b"), method="POST", json={"api_key": "body-key-001"})
    await runner.request("p", spec, CallPolicy(max_attempts=1))
    assert redact("echo body-key-001") == f"echo {MASK}"


# -- the shared points ----------------------------------------------------------------------


def test_provider_error_messages_are_redacted() -> None:
    remember("echoed-key-0001")
    exc = ProviderError("brave", "HTTP 401: token echoed-key-0001 is invalid")
    assert "echoed" not in str(exc) and "echoed" not in exc.message and MASK in exc.message


def test_error_answers_are_redacted() -> None:
    secret = "s3cr3tS3cr3tS3cr3tS3cr3t"
    body = Unauthorized(f"unknown API key ff_k1_{secret}").body()
    assert body.message == f"unknown API key ff_k1_{MASK}"
    assert secret not in ErrorBody(error="x", message=f"Bearer {secret}").model_dump_json()


def test_call_records_are_redacted_when_made_and_when_changed() -> None:
    remember("record-key-0001")
    record = CallRecord(platform="p", url="http://h/?token=abc&q=1", error="record-key-0001")
    assert record.url == f"http://h/?token={MASK}&q=1" and record.error == MASK
    record.error = "tool failed with Authorization: Bearer record-key-0001"
    assert "record-key" not in (record.error or "")


def test_error_bodies_are_redacted_before_they_are_cut() -> None:
    remember("cutoff-key-00000001")
    message = "x" * 190 + " cutoff-key-00000001 invalid"
    assert "cutoff" not in error_detail(json.dumps({"message": message}).encode())
    assert "cutoff" not in error_detail(message.encode())
    with pytest.raises(ProviderError) as caught:
        load_json("p", ("<html>" + "y" * 70 + "cutoff-key-00000001</html>").encode())
    assert "cutoff" not in str(caught.value)


async def test_the_runner_masks_an_echoed_key_in_records_errors_and_httpx_log(
    server: HTTPServer, runner: Runner, caplog: pytest.LogCaptureFixture, restored_log_factory: None
) -> None:
    key = "runner-echo-key-1"
    server.expect_request("/s").respond_with_response(
        Response(f"failed for key {key[:12]}... full: {key}", status=500)
    )
    caplog.set_level(logging.INFO, logger="httpx")
    spec = RequestSpec(
        url=server.url_for("/s"),
        params=[("q", "x"), ("k", key)],
        headers={"X-Subscription-Token": key},
        secret_params=frozenset({"k"}),
    )
    calls: list[CallRecord] = []
    with pytest.raises(ProviderError) as caught:
        await runner.request("p", spec, CallPolicy(max_attempts=1), calls)
    assert "HTTP 500" in str(caught.value) and key not in str(caught.value)
    assert calls[0].url is not None and f"k={MASK}" in calls[0].url and key not in calls[0].url
    assert calls[0].error is not None and key not in calls[0].error
    assert "runner-echo" in server.log[0][0].headers["X-Subscription-Token"]  # really sent
    httpx_lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert httpx_lines and all(key not in line for line in httpx_lines)


# -- logging --------------------------------------------------------------------------------


def test_redact_record_masks_arguments_message_and_traceback() -> None:
    remember("log-key-00000001")
    try:
        raise RuntimeError("boom with log-key-00000001")
    except RuntimeError:
        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "%s %s %d", ("log-key-00000001", "ok", 3),
            sys.exc_info(),
        )  # fmt: skip
    redact_record(record)
    assert record.args == (MASK, "ok", 3)  # kept as arguments, for formatters that read them
    text = logging.Formatter().format(record)
    assert "log-key" not in text and "boom with" in text


def test_redact_record_masks_a_secret_formed_across_arguments() -> None:
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "%s=%s", ("?key", "k-across-1"), None
    )
    redact_record(record)
    assert "k-across" not in record.getMessage()


def test_the_filter_masks_the_records_it_sees(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("fanfuse.test_redact.filtered")
    logger.addFilter(SecretFilter())
    with caplog.at_level(logging.INFO):
        logger.info("Authorization: %s", "Bearer filter-token-1")
    assert "filter-token" not in caplog.text and MASK in caplog.text


def test_install_masks_every_logger_once(
    caplog: pytest.LogCaptureFixture, restored_log_factory: None
) -> None:
    install_log_redaction()
    factory = logging.getLogRecordFactory()
    install_log_redaction()
    assert logging.getLogRecordFactory() is factory
    with caplog.at_level(logging.INFO):
        logging.getLogger("some.library").info("sent X-Api-Key: %s", "xk-installed-1")
    assert "xk-installed" not in caplog.text


@pytest.mark.parametrize(
    "entry",
    [
        "from fanfuse.cli.main import app",
        f"sys.path.insert(0, {str(REPO / 'functions')!r}); import main",
    ],
    ids=["cli", "functions"],
)
def test_the_entry_points_install_the_log_redaction(entry: str) -> None:
    """Any library's record, once the entry point is loaded, shows no configured secret."""
    code = (
        "import logging, os, sys; logging.basicConfig(level=logging.INFO); "
        f"{entry}; "
        "logging.getLogger('lib').warning('secret is %s', os.environ['FANFUSE_X_API_KEY'])"
    )
    env = {**os.environ, "FANFUSE_X_API_KEY": "entry-point-key-1"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "secret is ***" in done.stderr and "entry-point-key" not in done.stderr


def test_settings_render_no_key() -> None:
    """`SecretStr` hides the keys of typed settings; a named instance's settings are plain."""
    extra = {"team": {"engine": "brave", "settings": {"api_key": "extra-platform-key-1"}}}
    settings = Settings(extra_platforms=extra, tasks_hmac_secret="hmac-render-key-1")
    assert "extra-platform-key" not in repr(settings) and "hmac-render" not in repr(settings)
    assert "extra-platform-key" not in str(settings)
