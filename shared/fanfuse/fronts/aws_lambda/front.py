"""The Lambda handlers: Lambda events in; the Cloud Functions' own public targets
(`fanfuse.fronts.functions`) and the task deliveries' one verdict (`fanfuse.http.deliveries`) run.

Nothing is decided here that those modules already decide (methods, body limits, callers, the
delivery check, which failures are permanent, the JSON error bodies): each handler only turns its
event into what they take, and their answer into what Lambda expects.

- `http`: a Lambda function URL or API Gateway HTTP API event (payload format 2.0, and 1.0 too)
  -> `{statusCode, headers, body}`. apig-wsgi (a maintained WSGI adapter for exactly these
  events) hands it to a small Flask app that routes `/{target}` and `/{target}/...` to the three
  public targets, so one function serves `/start_search`, `/search_status/{task_id}`,
  `/search_status/openapi.json` and `/cancel_search`. FANFUSE_FUNCTION_URLS names these routes
  under the function's URL, so `status_url` points back at it. apig-wsgi also hands the event's
  `requestContext` to the targets (the WSGI environ's `apig_wsgi.request_context`): behind
  AWS_IAM routes it names the principal whose SigV4 signature API Gateway verified, which
  `auth.callers` takes as the caller when FANFUSE_TRUST_IAM_AUTHORIZER says so. This path is the
  one that still imports `fronts.functions`: the public targets are Flask handlers, served here
  over WSGI as they are rather than written twice.
- `sqs_handler(target)`: the worker (`run_platform`) and the aggregator (`aggregate`), triggered
  by an SQS event source mapping with ReportBatchItemFailures. Each record is the delivery a
  Cloud Task would make: its body, its `signature` attribute as `X-Fanfuse-Signature`, and its
  message id as the task-name header, which tells `deliveries.verdict` the delivery comes from
  the queue (a hopeless one is then dropped, not retried forever). The verdict decides, with no
  HTTP in between: done or drop: deleted by the mapping; retry: reported in
  `batchItemFailures`, so SQS delivers it again after the visibility timeout (and, after the
  redrive's `maxReceiveCount`, moves it to the dead-letter queue, where a forged message ends up
  for someone to look at), or sooner when the verdict names a wait (a held lease's Retry-After:
  ChangeMessageVisibility to that many seconds).
- A deadline message not yet due (`due_at`, see `queue.sqs`) is checked like any delivery, then
  sent again for its next hop and acknowledged.

Files: on Lambda only /tmp is writable (the code is read-only and HOME may not exist), so the
entry point (`functions/aws_lambda.py`) calls `use_scratch()` before anything runs: every cache
written at run time (fanfuse's index cache, FANFUSE_CACHE_DIR: the docs and vectors indexes;
Hugging Face's and any XDG cache; HOME itself when it cannot be written) goes under the
temporary directory, unless the deployment set it. Local runs (`fanfuse.fronts.aws_lambda.local`)
keep theirs.

Trust: the queues are reachable only by this deployment's roles (IAM, infra/aws), and on top of
that every message carries the HMAC of its body (FANFUSE_TASKS_HMAC_SECRET, in dev and in
production alike), checked by the target as in the local GCP stack; with no secret the targets
refuse every delivery (fail closed, `auth.task_deliveries.verify_delivery`).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import flask
from apig_wsgi import make_lambda_handler
from werkzeug.exceptions import HTTPException, NotFound

from fanfuse.auth.task_deliveries import SIGNATURE_HEADER, verify_delivery
from fanfuse.fronts import functions
from fanfuse.http import deliveries
from fanfuse.http.deliveries import TASK_NAME_HEADER
from fanfuse.http.routes import PUBLIC_TARGETS
from fanfuse.queue.sqs import DUE_ATTRIBUTE, SIGNATURE_ATTRIBUTE, SqsQueue
from fanfuse.runtimes import cloud
from fanfuse.settings import sources
from fanfuse.tracing import setup
from fanfuse.wire.errors import FanfuseError
from fanfuse.wire.models import utcnow

log = logging.getLogger(__name__)

LambdaEvent = dict[str, Any]
LambdaHandler = Callable[[LambdaEvent, Any], dict[str, Any]]
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
"""Every method reaches the target, which answers a wrong one with its own 405 JSON body."""
TASK_TARGETS = tuple(deliveries.MESSAGES)


LAMBDA_MARKER = "AWS_LAMBDA_FUNCTION_NAME"
"""Set by Lambda in every function's environment: the process runs on Lambda."""


# ---------------------------------------------------------------------------------------------
# Files: only the temporary directory is writable on Lambda


def scratch_env(environ: Mapping[str, str], tmp: str, home_writable: bool) -> dict[str, str]:
    """The variables to set so that nothing is written outside `tmp` on Lambda: the caches'
    folders the deployment left unset, and HOME when it cannot be written (a library that
    writes under `~` then writes under `tmp`). Nothing off Lambda."""
    if LAMBDA_MARKER not in environ:
        return {}
    wanted = {
        "FANFUSE_CACHE_DIR": os.path.join(tmp, "fanfuse"),
        "HF_HOME": os.path.join(tmp, "huggingface"),
        "XDG_CACHE_HOME": os.path.join(tmp, ".cache"),
    }
    if not home_writable:
        wanted["HOME"] = tmp
    return {
        name: value for name, value in wanted.items() if not environ.get(name) or name == "HOME"
    }


def use_scratch() -> dict[str, str]:
    """Apply `scratch_env` to this process (its temporary directory: /tmp on Lambda); what
    was set (through the settings package, the one place that touches the environment)."""
    environ = sources.variables()
    home = environ.get("HOME", "")
    writable = bool(home) and os.path.isdir(home) and os.access(home, os.W_OK)
    changes = scratch_env(environ, tempfile.gettempdir(), writable)
    sources.update(changes)
    return changes


# ---------------------------------------------------------------------------------------------
# HTTP: function URL / API Gateway events


def public(target: str, rest: str = "") -> flask.Response:
    """`/{target}[/...]` -> that public target of `fanfuse.fronts.functions`, with the request as it
    came."""
    if target not in PUBLIC_TARGETS:
        raise NotFound()
    answer: Callable[[flask.Request], flask.Response] = getattr(functions, target)
    return answer(flask.request)


def create_app() -> flask.Flask:
    app = flask.Flask("fanfuse.fronts.aws_lambda")
    app.add_url_rule("/<target>", view_func=public, methods=METHODS)
    app.add_url_rule("/<target>/<path:rest>", view_func=public, methods=METHODS)
    app.register_error_handler(HTTPException, functions.routing_error)
    return app


http: LambdaHandler = make_lambda_handler(create_app())
"""The HTTP API's Lambda handler (function URL or API Gateway)."""


# ---------------------------------------------------------------------------------------------
# SQS: the worker and the aggregator


_queue: SqsQueue | None = None


def queue() -> SqsQueue:
    """This process's queue client, for what a consumer asks of SQS (visibility, next hop)."""
    global _queue
    if _queue is None:
        _queue = SqsQueue(cloud.settings())
    return _queue


def attribute(record: Mapping[str, Any], name: str) -> str | None:
    """A string message attribute of an SQS event record (Lambda spells it `stringValue`)."""
    value = record.get("messageAttributes", {}).get(name)
    return None if value is None else str(value.get("stringValue"))


def delivery_headers(record: Mapping[str, Any]) -> dict[str, str]:
    """The headers of the delivery a record stands for: its signature, its task name, and its
    other string attributes (the trace it carries and when it was enqueued, `queue.sqs`)."""
    carried = {
        name: str(value.get("stringValue"))
        for name, value in record.get("messageAttributes", {}).items()
        if name not in (SIGNATURE_ATTRIBUTE, DUE_ATTRIBUTE) and "stringValue" in value
    }
    headers = {**carried, "Content-Type": "application/json", TASK_NAME_HEADER: record["messageId"]}
    signature = attribute(record, SIGNATURE_ATTRIBUTE)
    if signature is not None:
        headers[SIGNATURE_HEADER] = signature
    return headers


def not_yet_due(target: str, record: Mapping[str, Any], headers: dict[str, str]) -> bool:
    """A deadline message still short of its due time: checked, then sent on for its next hop."""
    due_at = attribute(record, DUE_ATTRIBUTE)
    due = None if due_at is None else datetime.fromisoformat(due_at)
    if due is None or due <= utcnow():
        return False
    # Checked first: sending it on signs it, which must never launder a forged message.
    verify_delivery(target, headers, record["body"].encode(), cloud.settings())
    queue().redeliver(record["eventSourceARN"], record["body"], due, target)
    return True


def verdict(target: str, record: Mapping[str, Any]) -> deliveries.Verdict:
    """The verdict on one record, delivered as the Cloud Task it stands for
    (`fanfuse.http.deliveries`); a deadline not yet due is done once it is sent on."""
    headers = delivery_headers(record)
    try:
        if not_yet_due(target, record, headers):
            return deliveries.done({"outcome": "not_due"})
    except FanfuseError as exc:
        log.warning("%s: refused message %s: %s", target, record["messageId"], exc)
        return deliveries.retry(exc)
    return deliveries.verdict(
        target,
        headers,
        record["body"].encode(),
        settings=cloud.settings(),
        tasks=cloud.service,
        run=cloud.loops.run,
    )


def deliver(target: str, record: Mapping[str, Any]) -> bool:
    """Run one record through `target`; True when it is done with (done or dropped: the
    mapping deletes it), False when SQS should deliver it again: after the verdict's `after_s`
    (a held lease's Retry-After) when it names one, made so with ChangeMessageVisibility, else
    after the queue's visibility timeout."""
    decided = verdict(target, record)
    if decided.outcome != "retry":
        return True
    if decided.after_s is not None:
        queue().retry_in(record["eventSourceARN"], record["receiptHandle"], decided.after_s)
    log.info(
        "%s: message %s not done (%s): left for SQS to deliver again",
        *(target, record["messageId"], decided.error and decided.error.status_code),
    )
    return False


def sqs_handler(target: str) -> LambdaHandler:
    """The handler of an SQS event source mapping for `run_platform` or `aggregate`: the
    records SQS should deliver again are reported in `batchItemFailures` (partial batch
    response), the others are deleted by the mapping."""
    if target not in deliveries.MESSAGES:
        raise ValueError(f"not a task target: {target}")

    def handle(event: LambdaEvent, context: Any) -> dict[str, Any]:
        failures = []
        for record in event.get("Records", []):
            try:
                done = deliver(target, record)
            except Exception:
                log.exception("%s: message %s failed", target, record.get("messageId"))
                done = False
            if not done:
                failures.append({"itemIdentifier": record["messageId"]})
        setup.flush()  # before Lambda freezes the instance (tracing/setup.py)
        return {"batchItemFailures": failures}

    handle.__name__ = target
    return handle


worker: LambdaHandler = sqs_handler("run_platform")
aggregator: LambdaHandler = sqs_handler("aggregate")
