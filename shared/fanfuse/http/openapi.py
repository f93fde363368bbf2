"""One OpenAPI 3.1 document for the HTTP API, generated from the wire models.

`fanfuse serve` and the Cloud Functions answer the same three public calls under the same names
(`start_search`, `search_status`, `cancel_search`), so one document describes both; the routes
only `serve` has (`/search`, the event stream) say so (`x-fanfuse-only: serve`).
The schemas are the models themselves (`model_json_schema` through `models_json_schema`, refs
under `#/components/schemas/`), never a second description that could drift: a schema change is
a model change. `docs/openapi.json` is this document checked in; a test fails when the two
differ, and `fanfuse openapi > docs/openapi.json` regenerates it.

Where it is served: `GET /openapi.json` on `serve`, and `GET {search_status URL}/openapi.json`
on the functions (`.` is never in a task id, so that path cannot name a search).

A deployment serves its own document (`render(deployment)`): deployment.py writes its platforms
and limits into the request's schema. `docs/openapi.json` is the document of no deployment in
particular.

One adjustment to what pydantic sees: a few request fields take a string as well as the list
their type says (a before-validator splits `"docs, vectors"`); pydantic cannot see through a
validator, so `INPUT_STRINGS` adds the string form to those fields' input schema (with the
`pattern` that keeps control characters out of every request string, as the models' own).
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from fanfuse.auth.keys import API_KEY_HEADER
from fanfuse.http.api import TASK_ID, CancelRequest
from fanfuse.http.deployment import Deployment, for_deployment
from fanfuse.http.patterns import COUNTRY, HOST, HOSTS, NOT_BLANK, items, strings
from fanfuse.http.stats import MAX_PARAMETER_CHARS
from fanfuse.support.version import __version__
from fanfuse.wire.inbound import text_schema
from fanfuse.wire.models import Accepted, ErrorBody, PlatformInfo, SearchRequest, TaskView
from fanfuse.wire.stats import WINDOW_PATTERN, Stats

REF = "#/components/schemas/{model}"
MODELS: list[tuple[type[BaseModel], JsonSchemaMode]] = [
    (SearchRequest, "validation"),
    (CancelRequest, "validation"),
    (Accepted, "serialization"),
    (TaskView, "serialization"),
    (ErrorBody, "serialization"),
    (PlatformInfo, "serialization"),
    (Stats, "serialization"),
]
INPUT_STRINGS = {
    "query": "one query as a string",
    "platform": '"all", a name, or comma-separated names',
    "include_domains": "comma-separated host names",
    "exclude_domains": "comma-separated host names",
}
SERVE_ONLY = {"x-fanfuse-only": "serve"}
RETRY_AFTER = {
    "Retry-After": {"description": "seconds to wait", "schema": {"type": "string"}},
}
AUTH = (401, 403)
"""What every route but this document may answer: `fanfuse.auth.callers` verifies the caller."""
SECURITY_SCHEMES = {
    "apiKey": {
        "type": "apiKey",
        "in": "header",
        "name": API_KEY_HEADER,
        "description": "`fanfuse keys create` (`fanfuse dev` and `fanfuse serve` print one)",
    },
    "idToken": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "a Firebase or Google-signed ID token",
    },
}


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


def _json(name: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ref(name)}}}


def _errors(*statuses: int) -> dict[str, Any]:
    meaning = {
        400: "invalid input: every problem listed, by field; nothing written (`over_budget`: "
        "the plan's estimated cost is over `max_cost_usd`, with the estimate and how to fit)",
        401: "no credential, or one that does not verify (`WWW-Authenticate` says how)",
        403: "a revoked API key",
        404: "no search with this task id",
        405: "method not allowed (the `Allow` header lists the allowed ones)",
        409: "the search is already terminal",
        410: "the search has expired (past its `expires_at`): nothing of it is served any more; "
        "a search of another owner is 404 even then, so ids are not disclosed",
        413: "body larger than 64 KiB",
        415: "a body not sent as application/json",
        429: "over the caller's quota (rate or searches in flight; `budget_spent`: its API "
        "key's daily budget; `too_many_streams`: streams open, FANFUSE_MAX_STREAMS_PER_CALLER, "
        "every key of an owner together); `Retry-After` says when",
        503: "infrastructure unavailable (`store_unavailable`: the store did not answer in "
        "time); try again, after `Retry-After` when it is given",
    }
    answers = {str(s): _json("ErrorBody", meaning[s]) for s in statuses}
    for status in ("429", "503"):
        if status in answers:
            answers[status]["headers"] = RETRY_AFTER
    return answers


def _task_id(where: str) -> dict[str, Any]:
    return {
        "name": "task_id",
        "in": where,
        "required": where == "path",
        "schema": task_id_schema(),
        "example": EXAMPLE_TASK_ID,
    }


EXAMPLE_TASK_ID = "5f0c6a4e9b2d4c71a3e8d2b6f4a1c9e7"
"""A task id as the service makes them (uuid4 hex); no search has it (404)."""
SEARCH_EXAMPLE = {"query": ["microwave waveguide", "dielectric constant"], "max_results": 5}
"""What a request looks like (and what schemathesis' examples phase sends): valid on any
deployment, since `platform` is left to its default, every available platform."""


def _body(model: str, example: dict[str, Any]) -> dict[str, Any]:
    media = {"schema": ref(model), "example": example}
    return {"required": True, "content": {"application/json": media}}


def task_id_schema() -> dict[str, Any]:
    """What `check_task_id` accepts, so that the schema allows no id the API refuses (an empty
    one among them)."""
    return {"type": "string", "minLength": 1, "maxLength": 128, "pattern": TASK_ID.pattern}


def events_schema() -> dict[str, Any]:
    """One event of the stream, as the stream's schema (each event is checked against it, as
    OpenAPI 3.2's `itemSchema` says and schemathesis reads a `text/event-stream` schema): its
    `event`, its `id` (`watch.event_id`) and its `data`, the JSON of a TaskView for `progress`,
    `done` and `timeout`, of an ErrorBody for `error` (the search was purged)."""

    def kind(event: str, model: str, meaning: str) -> dict[str, Any]:
        data = {"contentMediaType": "application/json", "contentSchema": ref(model)}
        return {
            "description": meaning,
            "properties": {"event": {"const": event}, "data": data},
        }

    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"type": "string", "enum": ["progress", "done", "timeout", "error"]},
            "id": {
                "type": "string",
                "pattern": r"^[0-9]{17}-[0-9a-f]{16}$",
                "description": "the state the event carries: the newest write to the search "
                "(microseconds since 1970, 17 digits) and a digest of the data; send it back as "
                "`Last-Event-ID` to resume",
            },
            "data": {"type": "string"},
        },
        "oneOf": [
            kind("progress", "TaskView", "the search changed (sent only on a change)"),
            kind("done", "TaskView", "the terminal document; the stream closes"),
            kind("timeout", "TaskView", "the last document, past the deadline; it closes"),
            kind("error", "ErrorBody", "the search vanished under the stream; it closes"),
        ],
    }


def links() -> dict[str, Any]:
    """The calls a search's `task_id` (in the answer's body) leads to, for clients and for the
    stateful tests (schemathesis follows them)."""
    task_id = "$response.body#/task_id"
    return {
        "status": {"operationId": "search_status", "parameters": {"path.task_id": task_id}},
        "status_by_query": {
            "operationId": "search_status_by_query",
            "parameters": {"query.task_id": task_id},
        },
        "events": {"operationId": "search_events", "parameters": {"path.task_id": task_id}},
        "cancel": {"operationId": "cancel_search", "requestBody": {"task_id": task_id}},
    }


def components(deployment: Deployment | None = None) -> dict[str, Any]:
    _, schemas = models_json_schema(MODELS, ref_template=REF)
    defs: dict[str, Any] = copy.deepcopy(schemas["$defs"])
    request = defs["SearchRequest"]["properties"]
    for name, description in INPUT_STRINGS.items():
        field = request[name]
        as_list = {k: field.pop(k) for k in list(field) if k in ("type", "items", "anyOf")}
        field["anyOf"] = [{"type": "string", "description": description}, as_list]
        if name == "query":
            for string in strings(field):
                string.update(minLength=1, pattern=NOT_BLANK)
        text_schema(field)  # the string form too holds no control character (inbound.py)
    for name in ("include_domains", "exclude_domains"):
        for string in strings(request[name]):
            string["pattern"] = HOSTS
        for string in items(request[name]):
            string.update(pattern=HOST, maxLength=253)
    for string in strings(request["country"]):
        string["pattern"] = COUNTRY
    defs["CancelRequest"]["properties"]["task_id"].update(task_id_schema())
    if deployment is not None:
        for_deployment(defs, deployment)
    return defs


_TEXT = {"text/plain": {"schema": {"type": "string"}}}


def _query(
    name: str, description: str, pattern: str | None = None, example: str | None = None
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "maxLength": MAX_PARAMETER_CHARS}
    if pattern is not None:
        schema["pattern"] = pattern
    parameter = {"name": name, "in": "query", "required": False, "description": description}
    return {**parameter, "schema": schema, **({"example": example} if example else {})}


def paths() -> dict[str, Any]:
    status = {
        "200": _json("TaskView", "the search with its platforms' live progress"),
        **_errors(*AUTH, 400, 404, 405, 410, 503),
    }
    location = {"Location": {"description": "the status_url", "schema": {"type": "string"}}}
    return {
        "/start_search": {
            "post": {
                "operationId": "start_search",
                "summary": "Start a search; poll its status_url",
                "requestBody": _body("SearchRequest", SEARCH_EXAMPLE),
                "responses": {
                    "202": {
                        **_json("Accepted", "accepted"),
                        "headers": location,
                        "links": links(),
                    },
                    **_errors(*AUTH, 400, 405, 413, 415, 429, 503),
                },
            }
        },
        "/search_status/{task_id}": {
            "get": {
                "operationId": "search_status",
                "summary": "The search's status (status_url)",
                "parameters": [_task_id("path")],
                "responses": status,
            }
        },
        "/search_status": {
            "get": {
                "operationId": "search_status_by_query",
                "summary": "The search's status, by `?task_id=`",
                "parameters": [{**_task_id("query"), "required": True}],
                "responses": status,
            }
        },
        "/cancel_search": {
            "post": {
                "operationId": "cancel_search",
                "summary": "Cancel a search: body `{task_id}` or `?task_id=` (cancel_url)",
                "description": "The search is named by the body `{task_id}`, or by `?task_id=` "
                "(the form `cancel_url` takes, POSTed as it is): given, the query's id is the one "
                "cancelled and the body is not read, so it may be left out. Neither is a 400 "
                "naming `body`. The document says the body is required, as one operation cannot "
                "say `one of a parameter or a body`: the body is the form it describes whole.",
                "parameters": [
                    {
                        **_task_id("query"),
                        "description": "the id, instead of the body's (cancel_url)",
                    }
                ],
                "requestBody": _body("CancelRequest", {"task_id": EXAMPLE_TASK_ID}),
                "responses": {
                    "200": _json("TaskView", "the cancelled search"),
                    **_errors(*AUTH, 400, 404, 405, 409, 410, 413, 415, 503),
                },
            }
        },
        "/search": {
            "post": {
                **SERVE_ONLY,
                "operationId": "search",
                "summary": "Search and wait: the final document in one call",
                "description": "Waits until the search is terminal, at most its deadline "
                "(timeout_s or the deployment's) plus a few seconds; past that cap it answers 202 "
                "with the running document and a Location to poll.",
                "requestBody": _body("SearchRequest", SEARCH_EXAMPLE),
                "responses": {
                    "200": {**_json("TaskView", "the terminal search"), "links": links()},
                    "202": {
                        **_json("TaskView", "still running at the cap"),
                        "headers": location,
                        "links": links(),
                    },
                    **_errors(*AUTH, 400, 405, 413, 415, 429, 503),
                },
            }
        },
        "/search_status/{task_id}/events": {
            "get": {
                **SERVE_ONLY,
                "operationId": "search_events",
                "summary": "Server-Sent Events of the search's progress",
                "description": "`event: progress` with the TaskView JSON on each change, then one "
                "`event: done` with the terminal document (or `event: timeout` with the last "
                "one when the deadline passes first); then the stream closes. Each event's id "
                "names the state it carries: a client reconnecting with `Last-Event-ID` gets the "
                "current state at once if it is newer than that id, then the live stream (a "
                "terminal search: its `done` event).",
                "parameters": [
                    _task_id("path"),
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "description": "the id of the last event received (an id this stream "
                        "did not send is ignored: the current state is sent)",
                        "schema": {"type": "string"},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "the event stream; the schema is that of one event",
                        "content": {"text/event-stream": {"schema": events_schema()}},
                    },
                    **_errors(*AUTH, 400, 404, 405, 410, 429),
                },
            }
        },
        "/platforms": {
            "get": {
                "operationId": "platforms",
                "summary": "The platforms, which are available here, and why the others are not "
                "(functions: GET {search_status URL}/platforms)",
                "responses": {
                    "200": {
                        "description": "one entry per platform",
                        "content": {
                            "application/json": {
                                "schema": {"type": "array", "items": ref("PlatformInfo")}
                            }
                        },
                    },
                    **_errors(*AUTH, 405),
                },
            }
        },
        "/stats": {
            "get": {
                "operationId": "stats",
                "summary": "Per platform figures over recent searches (functions: GET "
                "{search_status URL}/stats): an operator's of every owner, anyone else's own",
                "parameters": [
                    _query(
                        "window",
                        "how far back: 30m, 24h (default), 7d; longer reads 30d",
                        WINDOW_PATTERN,
                        "24h",
                    ),
                    _query("owner", "an operator's: one owner's searches (a caller subject)"),
                ],
                "responses": {
                    "200": _json("Stats", "the figures (aggregates only)"),
                    **_errors(*AUTH, 400, 405, 503),
                },
            }
        },
        "/metrics": {
            "get": {
                **SERVE_ONLY,
                "operationId": "metrics",
                "summary": "Prometheus metrics of this server, for an operator",
                "responses": {
                    "200": {"description": "Prometheus text format 0.0.4", "content": _TEXT},
                    **_errors(*AUTH, 405),
                },
            }
        },
        "/openapi.json": {
            "get": {
                "operationId": "openapi",
                "security": [],
                "summary": "This document (functions: GET {search_status URL}/openapi.json)",
                "responses": {
                    "200": {
                        "description": "OpenAPI 3.1",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
    }


@functools.cache
def _document(deployment: Deployment | None = None) -> str:
    doc = {
        "openapi": "3.1.0",
        "info": {
            "title": "fanfuse",
            "version": __version__,
            "description": "One search request, many platforms, one fused answer. The same "
            "calls on `fanfuse serve` and on the Cloud Functions (each function at its target's "
            "name); routes marked `x-fanfuse-only: serve` exist on `serve` only.",
        },
        "servers": [
            {"url": "http://127.0.0.1:8000", "description": "fanfuse serve (the url it prints)"},
            {
                "url": "https://{region}-{project}.cloudfunctions.net",
                "description": "the Cloud Functions",
                "variables": {
                    "region": {"default": "us-central1"},
                    "project": {"default": "demo-fanfuse"},
                },
            },
        ],
        "security": [{name: []} for name in SECURITY_SCHEMES],
        "paths": paths(),
        "components": {
            "schemas": components(deployment),
            "securitySchemes": SECURITY_SCHEMES,
        },
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def document(deployment: Deployment | None = None) -> dict[str, Any]:
    """The document as a fresh dict (built once per process and deployment)."""
    loaded: dict[str, Any] = json.loads(_document(deployment))
    return loaded


def render(deployment: Deployment | None = None) -> str:
    """The document as `docs/openapi.json` holds it (no deployment), or as `deployment`
    serves it."""
    return _document(deployment)
