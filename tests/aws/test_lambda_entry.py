"""The Lambda entry (`functions/aws_lambda.py`) run as Lambda runs it, in a child process: HOME
that cannot be written, `AWS_LAMBDA_FUNCTION_NAME` set, the store and queues on moto's server.

One search goes through all three handlers (http -> the docs queue -> worker, whose fan-in
finalizes it -> an aggregate message on its queue -> aggregator, which finds it final -> http
status), authenticated by ID tokens as a deployment configured for
them would be: a Firebase ID token (FANFUSE_FIREBASE_PROJECT) and a Google ID token
(FANFUSE_ID_TOKEN_AUDIENCES), verified against key sets on 127.0.0.1. The docs index the worker
builds lands under the temporary directory, and nothing else is written anywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer

from fanfuse.fronts.aws_lambda.front import LAMBDA_MARKER, scratch_env
from fanfuse.net.aws_clients import sqs_client
from fanfuse.queue.sqs import ensure_queues
from fanfuse.settings import Settings
from tests.support.aws_fixtures import AWS_ENV
from tests.support.platforms.harness import loopback_server
from tests.support.signing import (
    GOOGLE_ISSUER,
    PROJECT,
    KeySet,
    claims,
    make_key,
    user_claims,
)

ROOT = Path(__file__).resolve().parents[2]
AUDIENCE = "https://abc123.execute-api.us-east-1.amazonaws.com"
BACKEND = "backend@demo-fanfuse.iam.gserviceaccount.com"
"""The backend service account the Lambda is configured to accept Google ID tokens from."""
CORPUS = {
    "D1": "Microwave radiation fed through a rectangular waveguide.",
    "D2": "The dielectric constant of liquids measured at microwave frequencies.",
    "D3": "A laser produces coherent light by stimulated emission.",
}

LAMBDA_RUN = r"""
import base64, json, os, sys
sys.path.insert(0, "functions")
import aws_lambda
from fanfuse.runtimes import cloud
from fanfuse.fronts.aws_lambda.local import sqs_record
from fanfuse.net.aws_clients import sqs_client
from fanfuse.queue.port import AggregateMessage
from fanfuse.queue.sqs import SqsQueue, queue_arn

settings = cloud.settings()
client = sqs_client(settings)
queue = SqsQueue(settings, client)


def call(method, path, token, body=b""):
    event = {
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
        "headers": {"host": "abc123.execute-api.us-east-1.amazonaws.com",
                    "content-type": "application/json", "authorization": f"Bearer {token}"},
        "requestContext": {"http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                                    "sourceIp": "127.0.0.1"}},
        "body": base64.b64encode(body).decode(), "isBase64Encoded": True,
    }
    answer = aws_lambda.http(event, None)
    return answer["statusCode"], json.loads(answer["body"])


def deliver(name, handler):
    url = queue.queue_url(name)
    got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=1,
                                 MessageAttributeNames=["All"]).get("Messages", [])
    assert got, f"nothing on the {name} queue"
    record = sqs_record(got[0], queue_arn(client, url), settings.aws_region)
    assert handler({"Records": [record]}, None) == {"batchItemFailures": []}


tokens = json.loads(os.environ["TEST_TOKENS"])
request = json.dumps({"query": "microwave", "platform": "docs", "max_results": 2}).encode()
out = {}
for kind in ("firebase", "google"):
    status, accepted = call("POST", "/start_search", tokens[kind], request)
    assert status == 202, (status, accepted)
    deliver("docs", aws_lambda.worker)  # the last fan-in: it finalizes (rules/fan_in.py)
    queue.enqueue_aggregate(AggregateMessage(task_id=accepted["task_id"]))  # a late aggregate
    deliver("aggregate", aws_lambda.aggregator)
    status, view = call("GET", f"/search_status/{accepted['task_id']}", tokens[kind])
    assert status == 200, (status, view)
    out[kind] = {"status": view["status"], "owner": view["owner"], "results": len(view["results"])}
out["forged"] = call("POST", "/start_search", tokens["forged"], request)[0]
out["cache_dir"] = os.environ.get("FANFUSE_CACHE_DIR")
print(json.dumps(out))
"""


@pytest.fixture
def issuers() -> Iterator[HTTPServer]:
    server = loopback_server()
    yield server
    server.stop()


def lambda_env(tmp: Path, settings: Settings, issuers: HTTPServer, prefix: str) -> dict[str, str]:
    """Lambda's environment: no FANFUSE_CACHE_DIR, a HOME no one can write under (a path
    below a regular file: even root gets ENOTDIR), its own temporary directory."""
    blocker = tmp / "not-a-dir"
    blocker.write_text("")
    corpus = tmp / "lab.trec"
    corpus.write_text(
        "".join(f"<DOC>\n<DOCNO>{k}</DOCNO>\n<TEXT>{v}</TEXT>\n</DOC>\n" for k, v in CORPUS.items())
    )
    scratch = tmp / "lambda-tmp"
    scratch.mkdir()
    google, firebase = KeySet(issuers, "/google"), KeySet(issuers, "/firebase")
    google_key, firebase_key, stranger = make_key("g1"), make_key("f1"), make_key("f1")
    google.publish(google_key)
    firebase.publish(firebase_key)
    tokens = {
        "firebase": firebase_key.sign(user_claims("app-user-1")),
        "google": google_key.sign(
            claims(
                GOOGLE_ISSUER,
                AUDIENCE,
                sub="backend-sa-2",
                email=BACKEND,
                email_verified=True,
            )
        ),
        "forged": stranger.sign(user_claims("app-user-1")),
    }
    base = {k: v for k, v in os.environ.items() if not k.startswith(("FANFUSE_", "XDG_", "HF_"))}
    return {
        **base,
        **AWS_ENV,
        "HOME": str(blocker / "home"),
        "TMPDIR": str(scratch),
        LAMBDA_MARKER: "fanfuse-http",
        "PYTHONDONTWRITEBYTECODE": "1",
        "FANFUSE_CLOUD": "aws",
        "FANFUSE_AWS_ENDPOINT_URL": settings.aws_endpoint_url or "",
        "FANFUSE_DYNAMODB_TABLE": settings.dynamodb_table,
        "FANFUSE_QUEUE_PREFIX": prefix,
        "FANFUSE_DEPLOYED_PLATFORMS": json.dumps(["docs"]),
        "FANFUSE_TASKS_HMAC_SECRET": "lambda-entry-test",
        "FANFUSE_DOCS_CORPUS": str(corpus),
        "FANFUSE_PROGRESS_INTERVAL": "0",
        "FANFUSE_FIREBASE_PROJECT": PROJECT,
        "FANFUSE_FIREBASE_CERTS_URL": firebase.url,
        "FANFUSE_ID_TOKEN_AUDIENCES": json.dumps([AUDIENCE]),
        "FANFUSE_ID_TOKEN_PRINCIPALS": json.dumps([BACKEND]),
        "FANFUSE_GOOGLE_CERTS_URL": google.url,
        "TEST_TOKENS": json.dumps(tokens),
    }


def test_the_lambda_entry_writes_only_under_tmp_and_accepts_id_tokens(
    tmp_path: Path, aws_settings: Settings, issuers: HTTPServer
) -> None:
    prefix = f"l{uuid.uuid4().hex[:8]}"
    ensure_queues(sqs_client(aws_settings), prefix, ["docs"], visibility_timeout=30, max_receives=3)
    env = lambda_env(tmp_path, aws_settings, issuers, prefix)
    done = subprocess.run(
        [sys.executable, "-c", LAMBDA_RUN],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    for kind, subject in (("firebase", "app-user-1"), ("google", "backend-sa-2")):
        assert out[kind]["status"] == "completed" and out[kind]["results"] == 2, out
        assert out[kind]["owner"].endswith(subject)
    assert out["forged"] == 401
    scratch = tmp_path / "lambda-tmp"
    assert out["cache_dir"] == str(scratch / "fanfuse")
    indexes = list((scratch / "fanfuse" / "indexes").glob("*/bm25/meta.json"))
    assert len(indexes) == 1  # the docs index, built by the worker, under the temporary dir
    written = {p.name for p in tmp_path.iterdir()}
    assert written == {"not-a-dir", "lab.trec", "lambda-tmp"}  # nothing else, anywhere here


@pytest.mark.parametrize(
    ("environ", "home_writable", "expected"),
    [
        ({}, False, {}),  # not on Lambda: nothing changes
        (
            {LAMBDA_MARKER: "f"},
            True,
            {
                "FANFUSE_CACHE_DIR": "/tmp/fanfuse",
                "HF_HOME": "/tmp/huggingface",
                "XDG_CACHE_HOME": "/tmp/.cache",
            },
        ),
        (
            {LAMBDA_MARKER: "f", "FANFUSE_CACHE_DIR": "/mnt/efs/cache", "HF_HOME": "/opt/hf"},
            False,
            {"XDG_CACHE_HOME": "/tmp/.cache", "HOME": "/tmp"},
        ),
    ],
)
def test_on_lambda_unset_cache_folders_go_under_tmp(
    environ: dict[str, str], home_writable: bool, expected: dict[str, str]
) -> None:
    assert scratch_env(environ, "/tmp", home_writable) == expected
