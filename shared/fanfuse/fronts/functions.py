"""The Cloud Functions front: the HTTP handling of the five targets. The AWS Lambda front serves
the three public ones as they are (`fanfuse.fronts.aws_lambda.front` turns HTTP events into their
requests); the two task targets' delivery semantics are `fanfuse.http.deliveries`', which both
fronts map to their own terms. The service they call, its settings and event loops are the cloud
runtime's (`fanfuse.runtimes.cloud`: Firestore and Cloud Tasks, or DynamoDB and SQS when
FANFUSE_CLOUD=aws).

`functions/main.py` only names the five targets; what they share lives here: two wrappers that
check the method and map errors to JSON answers, `public_target` for the three public targets
and `task_target` for the two Cloud Tasks targets, so that each target holds only its own work.
The public targets, their methods and the routes `search_status` answers under its URL are the
route table's (`fanfuse.http.routes`), as `serve`'s routes and the OpenAPI document are.

Status codes. The three public targets answer 400 (every problem listed, by field), 404, 405,
409 or 413 for bad input, never 500; 5xx means infrastructure (Firestore, Cloud Tasks).
`run_platform` and `aggregate` are Cloud Tasks targets, and Cloud Tasks retries *any* answer
outside 2xx (docs: "If any other HTTP response code is returned ... the task will be retried");
`fanfuse.http.deliveries` decides done, drop or retry, and `task_target` answers accordingly.
Before anything else a delivery must prove it comes from the queue (`fanfuse.auth.task_deliveries`:
the tasks service account's OIDC token, or locally an HMAC of the body); one that does not is
answered 401/403 and touches nothing. A verified delivery that can never succeed (a malformed
body, an unknown task, a platform its search does not have) is acknowledged with 200 and
`{"outcome": "dropped", "error": ...}` when it comes from Cloud Tasks (it carries
`X-CloudTasks-TaskName`), and logged as an error; a signed direct call gets the plain 400/404.
Infrastructure failures answer 503, which Cloud Tasks retries with backoff. The wrapper tells
these apart by type only (every error class is in `fanfuse.wire.errors`, with its status), never by
an exception's message.

Identity. The three public targets authenticate their caller first, before anything is read
or written (`fanfuse.auth.callers`: an API key, an ID token, API Gateway's claims when
FANFUSE_TRUST_GATEWAY says the functions sit behind it, or on AWS the IAM principal API Gateway
verified when FANFUSE_TRUST_IAM_AUTHORIZER says every route is IAM-authorized); the caller's
subject becomes the search's `owner` (`firebase:<uid>` for a Firebase user, what
`firestore.rules` compare with `'firebase:' + request.auth.uid`), and a search with an owner is
visible (status, cancel) only to that caller. The OpenAPI document needs no credential.
`start_search` then admits the caller (its in-flight cap and start rate, `admission.py`) before
it parses the body, so that an invalid body spends the caller's token as a valid one does.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import flask
from pydantic import BaseModel, TypeAdapter
from werkzeug.exceptions import HTTPException

from fanfuse.auth.callers import LAMBDA_REQUEST_CONTEXT, visible_status
from fanfuse.http import cors, deliveries, routes, stats_route
from fanfuse.http.api import (
    CancelRequest,
    check_length,
    check_task_id,
    decode_json,
    error_answer,
    parse,
    require_method,
)
from fanfuse.runtimes.cloud import authenticator, loops, service, settings
from fanfuse.support import logs
from fanfuse.tracing import setup, spans
from fanfuse.wire.errors import FanfuseError, Unavailable
from fanfuse.wire.models import Caller, ErrorBody, PlatformInfo, utcnow

log = logging.getLogger(__name__)

Handler = Callable[[flask.Request], flask.Response]
"""What functions-framework calls for a target: one request in, one answer out."""

TASK_NAME_HEADER = deliveries.TASK_NAME_HEADER
STATUS_TARGET = "search_status"


# ---------------------------------------------------------------------------------------------
# HTTP helpers


def json_response(
    data: BaseModel | dict[str, Any] | bytes,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> flask.Response:
    """`data` as JSON (bytes: already JSON)."""
    if isinstance(data, bytes):
        body: str | bytes = data
    else:
        body = data.model_dump_json() if isinstance(data, BaseModel) else json.dumps(data)
    response = flask.Response(body, status=status, mimetype="application/json")
    response.headers["Cache-Control"] = "no-store"
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def error_response(exc: FanfuseError) -> flask.Response:
    answer = error_answer(exc)
    return json_response(answer.body, answer.status, answer.headers)


def routing_error(error: HTTPException) -> flask.Response | HTTPException:
    """What functions-framework refuses before any target runs, as JSON like every other answer
    (not werkzeug's HTML page): its `/<path:path>` rule matches no path with a newline in it,
    and it answers `/robots.txt` and `/favicon.ico` itself, both 404. A redirect (below 400)
    is left as werkzeug makes it."""
    if error.code is None or error.code < 400:
        return error
    code = re.sub(r"\W+", "_", (error.name or "error").strip().lower())
    body = ErrorBody(error=code, message=error.description or error.name)
    return json_response(body, error.code)


def read_json(request: flask.Request) -> Any:
    """The body as JSON, or a 400/413/415 that says what is wrong with it (see
    `fanfuse.http.api`)."""
    check_length(request.content_length)
    return decode_json(request.get_data(cache=True), request.headers.get("Content-Type"))


def task_id_of(request: flask.Request) -> str:
    """`?task_id=` or the last path segment (`status_url` is `{search_status URL}/{task_id}`).

    A leading `search_status` segment is the function's own name, not a task id: Cloud
    Functions strip it, but functions-framework and a gateway that appends the path keep it, so
    `GET /search_status` without `?task_id=` is the 400 the document promises, not a 404.
    """
    value = request.args.get("task_id")
    if value is None:
        segments = [s for s in request.path.split("/") if s]
        if segments[:1] == [STATUS_TARGET]:
            segments = segments[1:]
        value = segments[-1] if segments else None
    return check_task_id(value)


def caller(request: flask.Request) -> Caller | None:
    """The verified caller, or None (anonymous, where allowed); else 401/403 (`fanfuse.auth`)."""
    context = request.environ.get(LAMBDA_REQUEST_CONTEXT)  # the Lambda front's alone
    return authenticator().caller(request.headers, context)


# ---------------------------------------------------------------------------------------------
# The two wrappers: the method check and the mapping of errors to answers


def _infrastructure(target: str) -> flask.Response:
    """Anything but a FanfuseError is taken for infrastructure: logged, answered 503."""
    log.exception("%s failed", target)
    return error_response(Unavailable(f"{target} is temporarily unavailable; try again"))


def _require_method(request: flask.Request, target: str, allowed: tuple[str, ...]) -> None:
    require_method(target, request.method, allowed)


def public_target(answer: Handler) -> Handler:
    """A public target answering the methods of its routes (`routes.methods_of`): its errors
    become their own 4xx JSON body (or 5xx for an infrastructure error the service names, like
    QueueUnavailable), anything else 503.

    The target's name (what the 405 message and the log say) is the function's name, a target
    of the route table (KeyError at import otherwise). A request
    from a browser origin in `settings.cors_origins` gets CORS headers (`fanfuse.http.cors`),
    and its preflight (OPTIONS) a 204 before any credential is read; any other origin neither.
    """

    target = answer.__name__
    if target not in routes.PUBLIC_TARGETS:
        raise KeyError(f"{target} is no public target of the route table")
    methods = routes.methods_of(target)

    @functools.wraps(answer)
    def handle(request: flask.Request) -> flask.Response:
        headers = dict(request.headers)
        with ExitStack() as context:
            try:  # the trace is read inside the error handling: no header escapes as a 500
                context.enter_context(logs.request_context(headers))
                context.enter_context(
                    spans.server(f"{request.method} {target}", headers, _http_attributes(request))
                )
                context.enter_context(flushed())
            except Exception:
                return _infrastructure(target)
            origins = _cors_origins()
            origin = request.headers.get("Origin")
            if request.method == "OPTIONS":
                allowed = cors.preflight_headers(origin, origins, methods)
                if allowed is not None:
                    return flask.Response(status=204, headers=allowed)
            response = _answer(request)
            response.headers.update(cors.answer_headers(origin, origins))
            return response

    def _answer(request: flask.Request) -> flask.Response:
        try:
            _require_method(request, target, methods)
            return answer(request)
        except FanfuseError as exc:
            return error_response(exc)
        except Exception:
            return _infrastructure(target)

    return handle


def _http_attributes(request: flask.Request) -> dict[str, str]:
    """A server span's HTTP attributes (the semantic conventions'): the path, never the query
    (`?task_id=` is fine, but a key could be sent there by mistake)."""
    return {"http.request.method": request.method, "url.path": request.path}


@contextlib.contextmanager
def flushed() -> Iterator[None]:
    """The spans of the block exported before the answer leaves: a function's instance may be
    frozen once it has answered (tracing/setup.py)."""
    try:
        yield
    finally:
        setup.flush()


def _cors_origins() -> list[str]:
    """The origins whose pages may call the public targets (`fanfuse.http.cors`); none when the
    settings cannot be read (that error is the target's to report, not the CORS check's)."""
    try:
        return settings().cors_origins
    except Exception:
        return []


def task_target(target: str) -> Handler:
    """A Cloud Tasks target: `fanfuse.http.deliveries` decides what becomes of the delivery, and
    its verdict becomes the answer Cloud Tasks reads (which retries anything outside 2xx):
    done: 200 and the target's JSON; drop: 200 `{"outcome": "dropped", "error": ...}`; retry:
    the error's own status, body and headers (401/403 for a refused delivery, 4xx for a signed
    direct call, 5xx, with Retry-After when it names one). The method and the declared length
    are checked first (405, 413), before a byte of the body is read."""

    def handle(request: flask.Request) -> flask.Response:
        try:
            _require_method(request, target, ("POST",))
            check_length(request.content_length)
        except FanfuseError as exc:
            log.warning("%s: refused a delivery: %s", target, exc)
            return error_response(exc)
        with flushed():
            verdict = deliveries.verdict(
                target,
                dict(request.headers),
                request.get_data(cache=True),
                settings=settings(),
                tasks=service,
                run=loops.run,
            )
        return verdict_response(verdict)

    handle.__name__ = handle.__qualname__ = target
    return handle


def verdict_response(verdict: deliveries.Verdict) -> flask.Response:
    """A delivery's verdict as the HTTP answer Cloud Tasks reads (see `task_target`)."""
    if verdict.outcome == "done":
        return json_response(verdict.answer or {})
    assert verdict.error is not None, verdict
    if verdict.outcome == "drop":
        return json_response({"outcome": "dropped", "error": verdict.error.body().model_dump()})
    return error_response(verdict.error)


# ---------------------------------------------------------------------------------------------
# The five targets: each holds only its own work


@public_target
def start_search(request: flask.Request) -> flask.Response:
    """POST a SearchRequest -> 202 `{task_id, status, status_url}` (and `Location`).

    The caller is verified and admitted (a rate token spent) before the body is read: an
    invalid body costs its caller a start, so refusing bodies has a limit (admission.py)."""
    with logs.task_context(uuid.uuid4().hex):  # the search's id, from the caller's check on
        who = caller(request)
        svc = service()
        ticket = svc.admit(who)
    accepted = svc.start(read_json(request), ticket=ticket)
    return json_response(accepted, 202, {"Location": accepted.status_url})


@public_target
def search_status(request: flask.Request) -> flask.Response:
    """GET `/{task_id}` or `?task_id=` -> the merged TaskView; 404 for an unknown id.

    Without `?task_id=`, a path ending in the name of a route the table nests under
    `search_status` (`routes.nested`) is that route, answered by `NESTED`:
    GET `/openapi.json` -> the API's OpenAPI document as this deployment serves it
    (`openapi_document`), which `serve` answers at the same name: `.` is never in a task id, so
    the two cannot clash; no credential is needed, and no store is read (the service is built,
    for the platforms its validation accepts). GET `/stats` -> `stats_response`.
    GET `/platforms` -> every platform with its availability and health, as `serve`'s
    `/platforms` (any verified caller; `platforms` is never a task id either).
    """
    if request.args.get("task_id") is None:
        for name, route in routes.nested(STATUS_TARGET).items():
            if request.path.endswith("/" + name):
                return NESTED[route.operation_id](request)
    who = caller(request)
    return json_response(visible_status(service().status, task_id_of(request), who))


def openapi_response(request: flask.Request) -> flask.Response:
    return json_response(openapi_document())


def platforms_response(request: flask.Request) -> flask.Response:
    caller(request)  # its reasons name the provider settings this deployment lacks
    return json_response(TypeAdapter(list[PlatformInfo]).dump_json(service().platforms()))


def openapi_document() -> dict[str, Any]:
    """This deployment's document (http.deployment): the platforms its validation accepts and
    its limits written in, as `serve` serves its own, and each path's function as its server
    (`for_functions`), the routes only `serve` has left out."""
    from fanfuse.http.deployment import Deployment, for_functions
    from fanfuse.http.openapi import document

    config = settings()
    deployment = Deployment.of(config, service().catalog)
    return for_functions(document(deployment), config.function_urls)


def stats_response(request: flask.Request) -> flask.Response:
    """GET `{search_status URL}/stats` -> the figures `http.stats_route` lets this caller read (an
    operator's, Settings.operators, every owner's; anyone else's their own). `stats` is never
    a task id: the service makes uuid4 hex ids."""
    query = stats_route.query_for(caller(request), request.args, settings().operators)
    store = service().store
    return json_response(stats_route.collect(store, store, query, utcnow()))


@public_target
def cancel_search(request: flask.Request) -> flask.Response:
    """POST `{task_id}` -> the cancelled TaskView; 404 unknown, 409 once terminal."""
    who = caller(request)
    if request.args.get("task_id") is not None:
        task_id = check_task_id(request.args["task_id"])
    else:
        task_id = check_task_id(parse(CancelRequest, read_json(request)).task_id)
    svc = service()
    visible_status(svc.status, task_id, who)  # 404/410 before anything is written
    return json_response(svc.cancel(task_id))


NESTED: dict[str, Handler] = {
    "openapi": openapi_response,
    "stats": stats_response,
    "platforms": platforms_response,
}
"""The routes `search_status` answers under its URL (`routes.nested`), by operation id."""


run_platform = task_target("run_platform")
"""Run that platform once (idempotent); a platform its search lacks is UnknownPlatform."""
aggregate = task_target("aggregate")
"""Finalize the search once, or wait for its platforms (before the deadline)."""


__all__ = [
    "aggregate",
    "cancel_search",
    "public_target",
    "routing_error",
    "run_platform",
    "search_status",
    "service",
    "start_search",
    "task_target",
]
