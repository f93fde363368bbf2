"""Cloud Functions entry points, one per functions-framework target.

Thin on purpose: each target hands the request to `fanfuse.fronts.functions`, which maps errors
to JSON answers, over the service `fanfuse.runtimes.cloud` builds on first use (Firestore, Cloud
Tasks, the platform registry).
Deploy each function with `--entry-point` set to its name below.
"""

from __future__ import annotations

import flask
import functions_framework
from werkzeug.exceptions import HTTPException

from fanfuse.fronts import functions
from fanfuse.runtimes import cloud
from fanfuse.support.logs import install_json_logging
from fanfuse.support.redact import install_log_redaction
from fanfuse.tracing import setup as tracing

install_log_redaction()  # no log record of these processes shows a secret
install_json_logging(cloud.settings().project)  # Cloud Logging's JSON lines, traced (logs.py)
tracing.configure()  # on when OTEL_* says so (fanfuse/tracing/setup.py)


# functions-framework's own 404s (a path its routing cannot match) answered as JSON: it loads
# this module inside its app's context, with `errorhandler` bound to that app.
functions_framework.errorhandler(HTTPException)(functions.routing_error)


@functions_framework.http
def start_search(request: flask.Request) -> flask.Response:
    """POST a search request -> 202 `{task_id, status, status_url}`."""
    return functions.start_search(request)


@functions_framework.http
def search_status(request: flask.Request) -> flask.Response:
    """GET `/{task_id}` (or `?task_id=`) -> the search with its platforms' progress;
    GET `/openapi.json` -> the API's OpenAPI document."""
    return functions.search_status(request)


@functions_framework.http
def cancel_search(request: flask.Request) -> flask.Response:
    """POST `{"task_id": ...}` -> the cancelled search; 409 once it has finished."""
    return functions.cancel_search(request)


@functions_framework.http
def run_platform(request: flask.Request) -> flask.Response:
    """Cloud Tasks target: run one platform of one search."""
    return functions.run_platform(request)


@functions_framework.http
def aggregate(request: flask.Request) -> flask.Response:
    """Cloud Tasks target: fuse and finalize a search (exactly once)."""
    return functions.aggregate(request)
