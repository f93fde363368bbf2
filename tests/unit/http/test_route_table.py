"""The route table (`fanfuse.http.routes`) against every front that answers it and every file
that names its targets.

serve's routes, the functions' methods, the Lambda's targets and the OpenAPI document's paths
are derived from the table; these tests check that what each front answers is what the table
says, route by route (a derivation that went wrong fails here, not in a deployment). What
cannot be derived (functions/main.py's entry points, which functions-framework needs one per
target; Terraform's function lists; the deployment rehearsal's) is compared with the table's
`FUNCTION_TARGETS` and `PUBLIC_TARGETS`, so that a target added to one and not the others
fails.
"""

from __future__ import annotations

import ast
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import flask
import httpx
import pytest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.routing import Route as StarletteRoute

from fanfuse.auth.keys import API_KEY_HEADER
from fanfuse.fronts import functions
from fanfuse.fronts.aws_lambda import front
from fanfuse.fronts.serve import app as serve_app
from fanfuse.http import routes
from fanfuse.http.deployment import FUNCTION_OF_PATH, for_functions
from fanfuse.http.openapi import document
from fanfuse.platforms import Registry
from fanfuse.runtimes import cloud
from fanfuse.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH")
PAGE_PATHS = {"/", "/page/{name}"}
"""serve's own routes outside the API: the search page."""


def allow(header: str | None) -> set[str]:
    return {m.strip() for m in (header or "").split(",") if m.strip()}


def as_concrete(path: str) -> str:
    """A request path for a table path (a task id no search has)."""
    return path.replace("{task_id}", routes.EXAMPLE_TASK_ID)


# -- the table itself ---------------------------------------------------------------------------


def test_each_operation_and_each_path_method_is_in_the_table_once() -> None:
    ids = [route.operation_id for route in routes.ROUTES]
    assert len(ids) == len(set(ids))
    pairs = [(route.path, route.methods[0]) for route in routes.ROUTES]
    assert len(pairs) == len(set(pairs))
    with pytest.raises(KeyError):
        routes.operation("no_such_operation")


def test_a_functions_routes_share_its_methods() -> None:
    """One function checks the method before it knows which of its routes a path is."""
    for target in routes.PUBLIC_TARGETS:
        assert {route.methods for route in routes.routes_of(target)} == {
            routes.methods_of(target)
        }, target


def test_no_nested_route_is_named_as_the_service_names_a_search() -> None:
    """`{search_status URL}/stats` and the like take the place of a task id in the path: the
    service's ids are uuid4 hex, so no search is shadowed by a route."""
    for name in routes.nested("search_status"):
        assert not re.fullmatch(r"[0-9a-f]{32}", name), name


# -- the OpenAPI document -----------------------------------------------------------------------


def test_the_documents_operations_are_the_tables() -> None:
    doc = document()
    documented = {
        (path, method.upper()): op
        for path, item in doc["paths"].items()
        for method, op in item.items()
    }
    assert set(documented) == {(route.path, route.methods[0]) for route in routes.ROUTES}
    for route in routes.ROUTES:
        op = documented[(route.path, route.methods[0])]
        assert op["operationId"] == route.operation_id
        statuses = {int(s) for s in op["responses"]}
        assert statuses == {a.status for a in route.answers} | set(route.statuses), route.path
        params = {(p["name"], p["in"]) for p in op.get("parameters", [])}
        assert params == {(p.name, p.where) for p in route.parameters}, route.path
        assert ("requestBody" in op) == (route.body is not None), route.path
        assert (op.get("security") == []) == route.public, route.path
        only = op.get("x-fanfuse-only")
        assert only == (next(iter(route.fronts)) if len(route.fronts) == 1 else None)


def test_the_functions_document_keeps_the_routes_with_a_target() -> None:
    assert {r.path: r.target for r in routes.ROUTES if r.target} == FUNCTION_OF_PATH
    urls = {t: f"http://127.0.0.1:9/{t}" for t in routes.PUBLIC_TARGETS}
    kept = for_functions(document(), urls)["paths"]
    assert set(kept) == {route.path for route in routes.served_by("functions")}


# -- serve --------------------------------------------------------------------------------------


@pytest.fixture
def serve_app_unstarted(tmp_path: Path) -> Starlette:
    settings = Settings(db_path=tmp_path / "fanfuse.db")
    return serve_app.create_app(settings, registry=Registry.of([]), warm=[])


def test_serve_mounts_every_route_it_serves_and_no_other(serve_app_unstarted: Starlette) -> None:
    mounted = {
        r.path for r in serve_app_unstarted.routes if isinstance(r, StarletteRoute)
    } - PAGE_PATHS
    assert mounted == {route.path for route in routes.served_by("serve")}


async def test_serve_answers_each_route_with_its_methods(serve_app_unstarted: Starlette) -> None:
    """A wrong method is refused before anything else is read (no runtime needed): the 405
    names the table's methods and the route's name."""
    transport = httpx.ASGITransport(app=serve_app_unstarted)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        for route in routes.served_by("serve"):
            for method in set(METHODS) - set(route.methods):
                answer = await client.request(method, as_concrete(route.path))
                assert answer.status_code == 405, (route.path, method, answer.text)
                assert allow(answer.headers.get("allow")) == set(route.methods), route.path
                if method != "HEAD":
                    assert route.name in answer.json()["message"], answer.json()


def test_an_endpoint_for_an_operation_the_table_lacks_fails() -> None:
    with pytest.raises(KeyError):
        serve_app.answers("no_such_operation")(serve_app.metrics)
    assert "no_such_operation" not in serve_app.ENDPOINTS


def test_serve_refuses_to_start_without_an_endpoint_for_a_route(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoints = dict(serve_app.ENDPOINTS)
    del endpoints["metrics"]
    monkeypatch.setattr(serve_app, "ENDPOINTS", endpoints)
    with pytest.raises(RuntimeError, match="metrics"):
        serve_app.api_routes()


@pytest.fixture
async def serve_client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    issued: list[str] = []
    settings = Settings(db_path=tmp_path / "fanfuse.db")
    app = serve_app.create_app(settings, registry=Registry.of([]), warm=[], on_key=issued.append)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {API_KEY_HEADER: issued[0]}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=headers
        ) as client:
            yield client


async def test_serve_answers_the_nested_routes_in_the_functions_spelling_too(
    serve_client: httpx.AsyncClient,
) -> None:
    """`{search_status URL}/stats` on the functions is `/search_status/stats` on serve: the
    same answer as serve's own `/stats`."""
    nested = routes.nested("search_status")
    assert set(nested) == {"platforms", "stats", "openapi.json"}
    for name, route in nested.items():
        own = await serve_client.get(route.path)
        spelled = await serve_client.get(f"/search_status/{name}")
        assert own.status_code == spelled.status_code == 200, (name, spelled.text)
        assert own.headers["content-type"] == spelled.headers["content-type"]
        if name != "stats":  # the figures' window ends at the call's time
            assert own.content == spelled.content, name


# -- the functions and the Lambda ---------------------------------------------------------------


@pytest.fixture
def cloud_settings() -> Iterator[None]:
    cloud._settings = Settings(tasks_hmac_secret=SecretStr("route-table"))
    yield
    cloud._service = None
    cloud._settings = None
    cloud._authenticator = None


def test_the_functions_answer_each_public_target_with_its_methods(cloud_settings: None) -> None:
    app = flask.Flask("route-table")
    for target in routes.PUBLIC_TARGETS:
        answer = getattr(functions, target)
        for method in set(METHODS) - set(routes.methods_of(target)):
            with app.test_request_context(f"/{target}", method=method):
                response = answer(flask.request)
            assert response.status_code == 405, (target, method)
            assert allow(response.headers.get("Allow")) == set(routes.methods_of(target))


def test_search_status_has_an_answer_for_each_nested_route() -> None:
    nested = routes.nested("search_status").values()
    assert set(functions.NESTED) == {route.operation_id for route in nested}


def test_a_public_target_the_table_lacks_is_refused() -> None:
    def not_a_route(request: flask.Request) -> flask.Response:
        raise AssertionError("never called")

    with pytest.raises(KeyError):
        functions.public_target(not_a_route)


def test_the_lambda_routes_the_public_targets_and_nothing_else(cloud_settings: None) -> None:
    client = front.create_app().test_client()
    for target in routes.PUBLIC_TARGETS:
        for method in set(METHODS) - set(routes.methods_of(target)):
            answer = client.open(f"/{target}", method=method)
            assert answer.status_code == 405, (target, method)
            assert allow(answer.headers.get("Allow")) == set(routes.methods_of(target))
    for other in ("run_platform", "aggregate", "search", "metrics"):
        assert client.get(f"/{other}").status_code == 404, other


# -- what names the targets outside the library ------------------------------------------------


def entry_points(source: str) -> dict[str, str]:
    """functions/main.py's `@functions_framework.http` functions -> the `functions.` target each
    calls."""
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        if not any(ast.unparse(d) == "functions_framework.http" for d in node.decorator_list):
            continue
        calls = [
            ast.unparse(c.func)
            for c in ast.walk(node)
            if isinstance(c, ast.Call) and ast.unparse(c.func).startswith("functions.")
        ]
        found[node.name] = calls[0].removeprefix("functions.") if calls else ""
    return found


def test_functions_main_has_one_entry_point_per_target_calling_its_namesake() -> None:
    found = entry_points((ROOT / "functions" / "main.py").read_text())
    assert found == {target: target for target in routes.FUNCTION_TARGETS}


def hcl_list(text: str, pattern: str) -> list[str]:
    matched = re.search(pattern, text)
    assert matched is not None, pattern
    return re.findall(r'"([a-z_]+)"', matched.group(1))


def test_terraform_and_the_rehearsal_name_the_tables_targets() -> None:
    gcp = (ROOT / "infra" / "main.tf").read_text()
    assert sorted(hcl_list(gcp, r"functions\s*=\s*toset\(\[([^\]]*)\]\)")) == sorted(
        routes.FUNCTION_TARGETS
    )
    aws = (ROOT / "infra" / "aws" / "lambda.tf").read_text()
    public = hcl_list(aws, r"public_urls\s*=\s*\{\s*for target in \[([^\]]*)\]")
    assert sorted(public) == sorted(routes.PUBLIC_TARGETS)
    rehearsal = ast.parse((ROOT / "scripts" / "fanfuse_deploy" / "render.py").read_text())
    named = [
        ast.literal_eval(node.value)
        for node in rehearsal.body
        if isinstance(node, ast.Assign)
        and [ast.unparse(t) for t in node.targets] == ["GCP_FUNCTIONS"]
    ]
    assert [sorted(names) for names in named] == [sorted(routes.FUNCTION_TARGETS)]
