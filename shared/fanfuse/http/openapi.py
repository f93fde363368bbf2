"""One OpenAPI 3.1 document for the HTTP API, generated from the route table and the wire models.

`fanfuse serve` and the Cloud Functions answer the same three public calls under the same names
(`start_search`, `search_status`, `cancel_search`), so one document describes both; the routes
only `serve` has (`/search`, the event stream) say so (`x-fanfuse-only: serve`).
The paths are the route table's (`fanfuse.http.routes`: the routes the fronts serve), rendered
here; the schemas are the models themselves (`model_json_schema` through `models_json_schema`,
refs under `#/components/schemas/`), never a second description that could drift: a route
change is a change to the table, a schema change is a model change. `docs/openapi.json` is this
document checked in; a test fails when the two differ, and `fanfuse openapi > docs/openapi.json`
regenerates it.

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
from fanfuse.http.api import TASK_ID
from fanfuse.http.deployment import Deployment, for_deployment
from fanfuse.http.patterns import COUNTRY, HOST, HOSTS, NOT_BLANK, items, strings
from fanfuse.http.routes import (
    EVENT_STREAM,
    EXAMPLE_TASK_ID,
    ROUTES,
    TEXT,
    Parameter,
    Route,
    Success,
)
from fanfuse.support.version import __version__
from fanfuse.wire.inbound import text_schema
from fanfuse.wire.models import ErrorBody, TaskView

REF = "#/components/schemas/{model}"
STREAMED = (TaskView, ErrorBody)
"""The models an event stream's events carry (`events_schema`)."""
INPUT_STRINGS = {
    "query": "one query as a string",
    "platform": '"all", a name, or comma-separated names',
    "include_domains": "comma-separated host names",
    "exclude_domains": "comma-separated host names",
}
RETRY_AFTER = {
    "Retry-After": {"description": "seconds to wait", "schema": {"type": "string"}},
}
LOCATION = {"Location": {"description": "the status_url", "schema": {"type": "string"}}}
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


def models() -> list[tuple[type[BaseModel], JsonSchemaMode]]:
    """The document's schemas: the routes' bodies as they are validated, what they answer (an
    error body among it) as it is serialized."""
    bodies = dict.fromkeys(route.body.model for route in ROUTES if route.body is not None)
    answered = [answer.model for route in ROUTES for answer in route.answers if answer.model]
    answers: dict[type[BaseModel], None] = dict.fromkeys([*answered, *STREAMED, ErrorBody])
    validated: JsonSchemaMode = "validation"
    serialized: JsonSchemaMode = "serialization"
    return [(model, validated) for model in bodies] + [(model, serialized) for model in answers]


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
    stateful tests (schemathesis follows them): each route with a `link`, given the id where it
    reads it (its `task_id` parameter, else its body); those that read the search first, then
    those that change it."""
    task_id = "$response.body#/task_id"
    found: dict[str, Any] = {}
    for route in sorted(ROUTES, key=lambda r: r.body is not None):
        if route.link is None:
            continue
        if route.body is not None:
            found[route.link] = {
                "operationId": route.operation_id,
                "requestBody": {"task_id": task_id},
            }
        else:
            where = next(p.where for p in route.parameters if p.name == "task_id")
            found[route.link] = {
                "operationId": route.operation_id,
                "parameters": {f"{where}.task_id": task_id},
            }
    return found


def components(deployment: Deployment | None = None) -> dict[str, Any]:
    _, schemas = models_json_schema(models(), ref_template=REF)
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


def parameter(spec: Parameter) -> dict[str, Any]:
    """A route's parameter as the document states it: a task id is the one parameter every
    route that reads one shares (the schema of what the API accepts, an example), with the
    route's description added; any other is a string, at most its `max_length`, of its
    `pattern`."""
    stated: dict[str, Any] = {"name": spec.name, "in": spec.where, "required": spec.required}
    if spec.name == "task_id":
        stated.update(schema=task_id_schema(), example=EXAMPLE_TASK_ID)
        if spec.description is not None:
            stated["description"] = spec.description
        return stated
    if spec.description is not None:
        stated["description"] = spec.description
    schema: dict[str, Any] = {"type": "string"}
    if spec.max_length is not None:
        schema["maxLength"] = spec.max_length
    if spec.pattern is not None:
        schema["pattern"] = spec.pattern
    stated["schema"] = schema
    if spec.example is not None:
        stated["example"] = spec.example
    return stated


def answer(spec: Success) -> dict[str, Any]:
    """A route's successful answer: its content's schema, its headers, its links."""
    if spec.media == EVENT_STREAM:
        schema = events_schema()
    elif spec.media == TEXT:
        schema = {"type": "string"}
    elif spec.model is None:
        schema = {"type": "object"}
    elif spec.many:
        schema = {"type": "array", "items": ref(spec.model.__name__)}
    else:
        schema = ref(spec.model.__name__)
    stated: dict[str, Any] = {
        "description": spec.description,
        "content": {spec.media: {"schema": schema}},
    }
    if spec.location:
        stated["headers"] = LOCATION
    if spec.links:
        stated["links"] = links()
    return stated


def operation(route: Route) -> dict[str, Any]:
    """A route as the document's operation; one served by a single front says which
    (`x-fanfuse-only`)."""
    stated: dict[str, Any] = {}
    if len(route.fronts) == 1:
        stated["x-fanfuse-only"] = next(iter(route.fronts))
    stated["operationId"] = route.operation_id
    if route.public:
        stated["security"] = []
    stated["summary"] = route.summary
    if route.description is not None:
        stated["description"] = route.description
    if route.parameters:
        stated["parameters"] = [parameter(p) for p in route.parameters]
    if route.body is not None:
        media = {"schema": ref(route.body.model.__name__), "example": route.body.example}
        stated["requestBody"] = {"required": True, "content": {"application/json": media}}
    stated["responses"] = {
        **{str(success.status): answer(success) for success in route.answers},
        **_errors(*route.statuses),
    }
    return stated


def paths() -> dict[str, Any]:
    """The route table (http/routes.py) as the document's paths, each documented under its
    first method (a HEAD is the GET it goes with)."""
    found: dict[str, Any] = {}
    for route in ROUTES:
        found.setdefault(route.path, {})[route.methods[0].lower()] = operation(route)
    return found


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
