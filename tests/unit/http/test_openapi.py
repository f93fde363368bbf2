"""The one OpenAPI document: generated from the models, checked in, and coherent.

When `test_checked_in_document_is_the_generated_one` fails, a model or a route changed:
regenerate with `fanfuse openapi > docs/openapi.json` and review the diff.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import flask
import jsonschema
import openapi_spec_validator
import pytest
from pydantic import ValidationError

from fanfuse.fronts import functions
from fanfuse.http.api import check_task_id
from fanfuse.http.deployment import Deployment, any_case, for_functions, function_server
from fanfuse.http.openapi import document, render
from fanfuse.http.patterns import NOT_BLANK
from fanfuse.http.routes import PUBLIC_TARGETS
from fanfuse.runtimes import cloud
from fanfuse.settings import Settings
from fanfuse.wire.errors import InvalidRequest
from fanfuse.wire.inbound import TEXT_PATTERN
from fanfuse.wire.models import SearchRequest

CHECKED_IN = Path(__file__).resolve().parents[3] / "docs" / "openapi.json"


def refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(refs(v) for v in node))
    return set()


def test_checked_in_document_is_the_generated_one() -> None:
    assert CHECKED_IN.read_text(encoding="utf-8") == render(), (
        "docs/openapi.json is stale: run `fanfuse openapi > docs/openapi.json`"
    )


def test_every_ref_resolves_and_the_public_calls_are_named_like_the_functions() -> None:
    doc = document()
    assert doc["openapi"].startswith("3.1")
    schemas = doc["components"]["schemas"]
    assert {f"#/components/schemas/{name}" for name in schemas} >= refs(doc)
    assert {"SearchRequest", "Accepted", "TaskView", "ErrorBody", "CancelRequest"} <= set(schemas)
    operations = {op["operationId"] for path in doc["paths"].values() for op in path.values()}
    assert set(PUBLIC_TARGETS) <= operations
    # A request field the validators also take as a string says so.
    platform = schemas["SearchRequest"]["properties"]["platform"]
    string = {
        "type": "string",
        "description": '"all", a name, or comma-separated names',
        "pattern": TEXT_PATTERN,
    }
    assert string in platform["anyOf"]
    query = schemas["SearchRequest"]["properties"]["query"]
    query_string: dict[str, Any] = {
        "type": "string",
        "description": "one query as a string",
        "minLength": 1,
        "pattern": NOT_BLANK,
    }
    assert query_string in query["anyOf"]


@pytest.mark.parametrize("query", ["", " ", "\t\n", "\u3000", "a\x01", " laser ", "é", "a b"])
def test_a_query_string_is_valid_in_the_schema_exactly_when_the_api_takes_it(query: str) -> None:
    """Schemathesis found the gap: `""` was schema-valid and refused (400)."""
    schema = document()["components"]["schemas"]["SearchRequest"]["properties"]["query"]
    valid_in_schema = jsonschema.Draft202012Validator(schema).is_valid(query)
    try:
        SearchRequest.model_validate({"query": query})
        taken = True
    except ValidationError:
        taken = False
    assert valid_in_schema == taken, query
    assert jsonschema.Draft202012Validator(schema).is_valid([query]) == taken, query


@pytest.mark.parametrize("task_id", ["", "-a", "a" * 129, "a b", "abc", "A_1-z", "a" * 128])
def test_a_task_id_is_valid_in_the_schema_exactly_when_the_api_takes_it(task_id: str) -> None:
    doc = document()
    cancel = doc["components"]["schemas"]["CancelRequest"]
    path = doc["paths"]["/search_status/{task_id}"]["get"]["parameters"][0]["schema"]
    try:
        check_task_id(task_id)
        taken = True
    except InvalidRequest:
        taken = False
    assert jsonschema.Draft202012Validator(path).is_valid(task_id) == taken
    assert jsonschema.Draft202012Validator(cancel).is_valid({"task_id": task_id}) == taken


def test_the_event_stream_describes_each_event_and_its_data() -> None:
    stream = document()["paths"]["/search_status/{task_id}/events"]["get"]
    media = stream["responses"]["200"]["content"]["text/event-stream"]
    item = media["schema"]
    kinds = {
        kind["properties"]["event"]["const"]: kind["properties"]["data"]["contentSchema"]["$ref"]
        for kind in item["oneOf"]
    }
    assert kinds == {
        "progress": "#/components/schemas/TaskView",
        "done": "#/components/schemas/TaskView",
        "timeout": "#/components/schemas/TaskView",
        "error": "#/components/schemas/ErrorBody",
    }
    assert set(item["properties"]["event"]["enum"]) == set(kinds)
    assert [p["name"] for p in stream["parameters"]] == ["task_id", "Last-Event-ID"]


def test_it_validates_as_openapi_3_1() -> None:
    openapi_spec_validator.validate(document())


class _Names:
    def names(self) -> list[str]:
        return ["docs", "web"]


class _Catalog:
    """What the functions' document asks of the service's catalog: the platforms validation
    accepts, those that can run, and every name a chain may mention."""

    registry = _Names()

    def available(self) -> list[str]:
        return ["docs", "web"]

    def runnable(self) -> list[str]:
        return ["docs", "web"]


class _Available:
    catalog = _Catalog()


LOCAL_URLS = {
    "start_search": "http://127.0.0.1:8101",
    "search_status": "http://127.0.0.1:8102",
    "cancel_search": "http://127.0.0.1:8103",
}


def test_the_functions_serve_their_deployments_document_under_search_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deployment's platforms and limits written in, as serve's; each path's server is the
    function that answers it; the routes only serve has are not there, nor links to them."""
    monkeypatch.setattr(cloud, "_settings", Settings(function_urls=LOCAL_URLS))
    monkeypatch.setattr(cloud, "_service", _Available())
    app = flask.Flask("openapi")
    with app.test_request_context("/openapi.json", method="GET"):
        answer = functions.search_status(flask.request)
    assert answer.status_code == 200
    served = json.loads(answer.get_data())
    deployment = Deployment.of(Settings(), _Catalog())  # type: ignore[arg-type]
    assert served == for_functions(document(deployment), LOCAL_URLS)
    openapi_spec_validator.validate(served)
    servers = {path: item["servers"][0]["url"] for path, item in served["paths"].items()}
    assert servers == {
        "/start_search": LOCAL_URLS["start_search"],
        "/search_status/{task_id}": LOCAL_URLS["search_status"],
        "/search_status": LOCAL_URLS["search_status"],
        "/cancel_search": LOCAL_URLS["cancel_search"],
        "/platforms": LOCAL_URLS["search_status"],
        "/stats": LOCAL_URLS["search_status"],
        "/openapi.json": LOCAL_URLS["search_status"],
    }
    started = served["paths"]["/start_search"]["post"]["responses"]["202"]["links"]
    assert set(started) == {"status", "status_by_query", "cancel"}  # no `events`: serve's


@pytest.mark.parametrize(
    ("path", "target", "url", "server"),
    [
        # cloudfunctions.net names every function under one host, by its name
        (
            "/start_search",
            "start_search",
            "https://r-p.cloudfunctions.net/start_search",
            "https://r-p.cloudfunctions.net",
        ),
        (
            "/search_status/{task_id}",
            "search_status",
            "https://r-p.cloudfunctions.net/search_status",
            "https://r-p.cloudfunctions.net",
        ),
        (
            "/stats",
            "search_status",
            "https://r-p.cloudfunctions.net/search_status",
            "https://r-p.cloudfunctions.net/search_status",
        ),
        # a run.app URL is the function's own host (it reads the path it is given)
        (
            "/cancel_search",
            "cancel_search",
            "https://cancel-search-x.a.run.app",
            "https://cancel-search-x.a.run.app",
        ),
        (
            "/openapi.json",
            "search_status",
            "https://search-status-x.a.run.app/",
            "https://search-status-x.a.run.app",
        ),
        # the Lambda's routes under its function URL
        (
            "/search_status",
            "search_status",
            "https://l.lambda-url.us-east-1.on.aws/search_status",
            "https://l.lambda-url.us-east-1.on.aws",
        ),
    ],
)
def test_a_paths_server_is_where_its_function_answers_it(
    path: str, target: str, url: str, server: str
) -> None:
    assert function_server(path, target, url) == server


def test_every_route_but_the_document_asks_for_a_key_or_an_id_token() -> None:
    doc = document()
    schemes = doc["components"]["securitySchemes"]
    assert schemes["apiKey"] == {**schemes["apiKey"], "in": "header", "name": "X-Api-Key"}
    assert schemes["idToken"]["scheme"] == "bearer"
    assert doc["security"] == [{"apiKey": []}, {"idToken": []}]  # either one
    for path, operations in doc["paths"].items():
        for operation in operations.values():
            if path == "/openapi.json":
                assert operation["security"] == [] and "401" not in operation["responses"]
            else:
                assert {"401", "403"} <= set(operation["responses"]), path


@pytest.mark.parametrize(
    "country", ["", "us", " De ", "ZZ", "\u3000cn", "u s", "USA", "\tFR\n", "\rUS"]
)
def test_a_country_is_valid_in_the_schema_exactly_when_the_api_takes_it(country: str) -> None:
    """Schemathesis found the gap: `""` was schema-valid and refused (400)."""
    schema = document()["components"]["schemas"]["SearchRequest"]["properties"]["country"]
    try:
        SearchRequest.model_validate({"query": "q", "country": country})
        taken = True
    except ValidationError:
        taken = False
    assert jsonschema.Draft202012Validator(schema).is_valid(country) == taken, country


@pytest.mark.parametrize(
    "domains",
    [
        "",
        "a.com",
        " a.com ,, b.org",
        "-a.com",
        "a..b",
        "http://a.com",
        ",",
        None,
        ["", "a.com"],
        ["a.com."],
        ["a_b.com"],
        [" x.org "],
    ],
)
def test_a_domain_list_is_valid_in_the_schema_exactly_when_the_api_takes_it(
    domains: str | list[str] | None,
) -> None:
    """Schemathesis found the gap: `[""]` was schema-valid and refused (400). (The schema
    names hosts in their ASCII form; the API takes Unicode names too.)"""
    schema = document()["components"]["schemas"]["SearchRequest"]["properties"]
    try:
        SearchRequest.model_validate({"query": "q", "exclude_domains": domains})
        taken = True
    except ValidationError:
        taken = False
    assert jsonschema.Draft202012Validator(schema["exclude_domains"]).is_valid(domains) == taken


# -- a deployment's document: its platforms, deadline and max_queries written in ----------------

HERE = Deployment(
    platforms=("docs", "vectors", "web_gate"),
    deadline_seconds=5.0,
    max_queries=3,
    known=("docs", "google", "vectors", "web_gate"),
)
UNAVAILABLE = {"google": "missing or invalid settings: FANFUSE_GOOGLE_API_KEY"}


def request_validator(doc: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """The document's SearchRequest, its $refs resolved inside the document."""
    schema = {"$ref": "#/components/schemas/SearchRequest", "components": doc["components"]}
    return jsonschema.Draft202012Validator(schema)


def taken_here(body: dict[str, Any]) -> bool:
    context = {
        "available": list(HERE.platforms),
        "unavailable": UNAVAILABLE,
        "deadline_seconds": HERE.deadline_seconds,
        "max_queries": HERE.max_queries,
    }
    try:
        SearchRequest.model_validate(body, context=context)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(
    "fields",
    [
        *(
            {"platform": p}
            for p in [
                "all",
                "ALL, all",
                " docs",
                ",docs,",
                "web_gate, DOCS",
                "VecTors",
                ["docs", "Vectors"],
                ["all", ""],
                ["all", "docs"],
                "all,docs",
                "google",
                "nope",
                "",
                ",",
                [""],
                [],
                "docs" + "," * 63,
                "docs" + "," * 64,
                [""] * 63 + ["docs"],
                [""] * 64 + ["docs"],
                ["all"] * 64,
                "docs|vectors",
                " DOCS | vectors , web_gate",
                ["docs|web_gate", "vectors"],
                "docs|google",  # a chain may list a platform that cannot run here
                "google|docs, docs",  # google's run keeps no member that can run: dropped
                ["google|docs", "docs"],
                "google|docs",
                "google|google",
                "google",
                "docs|",
                "|docs",
                "docs||vectors",
                "docs|nope",
                "docs|all",
                "docs|" * 63 + "docs",
                "docs|" * 64 + "docs",
            ]
        ),
        *({"weights": w} for w in [{"": 1}, {"docs": 1}, {" Vectors ": 2}, {"google": 1}]),
        {"platform": "docs", "weights": {"vectors": 1.5}},
        *({"timeout_s": t} for t in [0.5, 5, 5.0, 5.01, 0.49, 120]),
        *({"hedge_after_s": h} for h in [0, 0.5, 5, 5.01, -1, "p90", "off", "soon", None]),
        *({"query": q} for q in [["a"] * 3, ["a"] * 4, "a"]),
        *({"max_results": n} for n in [10, 10.0, 10.5, 101]),
    ],
)
def test_a_request_is_valid_in_a_deployments_document_exactly_when_it_takes_it(
    fields: dict[str, Any],
) -> None:
    """Schemathesis (`--checks all`) found each kind: an unknown or unavailable platform, a
    weight for no platform, a timeout past the deadline were schema-valid and refused. The one
    gap left is the other way: a list item holding commas (`["docs,vectors"]`) is read as
    those names, and the document says one name an item (`selection_schemas`)."""
    body = {"query": "laser", **fields}
    assert request_validator(document(HERE)).is_valid(body) == taken_here(body), body


def test_a_deployments_document_differs_from_the_checked_in_one_only_in_the_request() -> None:
    served, generic = document(HERE), document()
    assert served["components"]["schemas"].pop("SearchRequest") != (
        generic["components"]["schemas"].pop("SearchRequest")
    )
    assert served == generic
    openapi_spec_validator.validate(document(HERE))


def test_any_case_matches_what_lowers_to_the_name() -> None:
    pattern = re.compile(f"^{any_case('kw_9')}$")
    for spelling in ("kw_9", "KW_9", "\u212aw_9"):  # U+212A KELVIN SIGN lowers to k
        assert pattern.match(spelling) and spelling.lower() == "kw_9"
    assert not pattern.match("kw-9") and not pattern.match("kw_99")


def test_a_deployment_with_no_platform_refuses_every_request_in_its_document() -> None:
    lonely = Deployment(platforms=(), deadline_seconds=5.0)
    check = request_validator(document(lonely))
    assert not check.is_valid({"query": "laser"}) and not check.is_valid(
        {"query": "a", "platform": "all"}
    )


def test_cancel_names_its_search_by_body_or_query_and_the_body_is_the_form_required() -> None:
    cancel = document()["paths"]["/cancel_search"]["post"]
    assert cancel["requestBody"]["required"] is True
    assert [(p["name"], p["in"], p["required"]) for p in cancel["parameters"]] == [
        ("task_id", "query", False)
    ]
