"""The Starlette application of `fanfuse serve`: routes named like the functions, one runtime.

The API's routes are the route table's (`fanfuse.http.routes`): each endpoint here answers
operations of the table (`answers`), and the app mounts every route the table says `serve`
answers at its path, under its name, with its methods (`api_routes`); the routes nested under
`search_status`'s URL on the functions (`{search_status URL}/stats`) are answered under that
spelling too. The search page's two routes are the app's own, outside the API.

Every route takes every method and checks it itself (`route`), so a wrong method gets the
functions' 405 JSON body with `Allow`, not Starlette's plain-text one; errors are mapped by
`fanfuse.http.api.error_answer`, and anything that is not a FanfuseError is logged and answered 503,
as the functions do. A line logged while a route runs carries its request's trace
(`traceparent` or `X-Cloud-Trace-Context`, logs.py), as a function's line does.

`/` is the search page (page.py), static and public: its own calls are verified as anyone's.

Callers are verified as the functions verify them (`fanfuse.auth.callers`: an API key or an ID
token, against this runtime's store), on every route but `/openapi.json` and the page's static
files; `/platforms` too, since its reasons name the provider settings this deployment lacks. A
search belongs to its caller's subject, and is visible only to it. At start-up a key for owner
`local` is created and handed to `on_key` (the server prints it); it is revoked when the server
stops.

The service is synchronous over SQLite and runs on the event loop's thread, as in the embedded
runtime: a store call is a short local read or write. One thing a caller controls the cost of
does not: a body's decoding and validation (up to 64 KiB; linear, about a millisecond for an
ordinary one, a few for the worst shapes) run on one worker thread (`check_body`), one body at
a time, so that twenty hostile bodies at once queue there while the loop goes on answering
(`/openapi.json`, status polls, the event streams). Validation reads the store only for the
platforms' health, through the store's lock (`SqliteStore` is shared across threads so).
A start admits its caller (one rate token, `admission.py`) before the body is read: an invalid
body costs a token as a valid one does.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack, asynccontextmanager, contextmanager
from typing import Any, TypeVar

import anyio
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from fanfuse.auth import keys
from fanfuse.auth.callers import Authenticator, visible_status
from fanfuse.fronts.serve import page, watch
from fanfuse.fronts.serve.metrics import Metrics, Streams
from fanfuse.http import api, routes, stats_route
from fanfuse.http.deployment import Deployment
from fanfuse.http.openapi import render
from fanfuse.http.streams import StreamCap, Watchers, for_service
from fanfuse.platforms import Registry
from fanfuse.platforms.contract import PlatformContext, SearchParams
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.store.ports import KeyStore
from fanfuse.support import logs
from fanfuse.tracing import spans
from fanfuse.wire.errors import FanfuseError, InvalidRequest, Unavailable
from fanfuse.wire.models import Accepted, Caller, Problem, TaskView, utcnow

log = logging.getLogger(__name__)

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
OFFLINE = ("docs", "vectors")
"""The platforms with a model or an index to load, warmed at startup by default."""
SSE_PING = 15.0
Endpoint = Callable[[Request, EmbeddedRuntime], Awaitable[Response]]
T = TypeVar("T")
ENDPOINTS: dict[str, Endpoint] = {}
"""operation id (the route table's) -> the endpoint that answers it (`answers`)."""


def json_response(
    data: BaseModel | Sequence[BaseModel] | dict[str, Any],
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> Response:
    if isinstance(data, BaseModel):
        body = data.model_dump_json()
    elif isinstance(data, dict):
        body = json.dumps(data)
    else:
        body = json.dumps([item.model_dump(mode="json") for item in data])
    answer = Response(body, status, media_type="application/json")
    answer.headers["Cache-Control"] = "no-store"
    answer.headers.update(headers or {})
    return answer


def error_response(exc: FanfuseError) -> Response:
    answer = api.error_answer(exc)
    return json_response(answer.body, answer.status, answer.headers)


async def read_body(request: Request) -> bytes:
    """The body's bytes: 413 from a declared length at once, else stops reading past the limit."""
    api.check_length(api.declared_length(request.headers.get("content-length")))
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > api.MAX_BODY_BYTES:
            raise api.too_large()
    return bytes(raw)


async def check_body(request: Request, check: Callable[[bytes, str | None], T]) -> T:
    """`check(body, content type)` on the body-checking thread, one body at a time (the
    limiter made in the lifespan): what it costs is not spent on the event loop."""
    raw = await read_body(request)
    content_type = request.headers.get("content-type")
    limiter: anyio.CapacityLimiter = request.app.state.checking
    return await anyio.to_thread.run_sync(check, raw, content_type, limiter=limiter)


async def admitted_start(request: Request, runtime: EmbeddedRuntime) -> Accepted:
    """Verify the caller, admit it (a token spent), then decode and validate the body off the
    loop, then start: the service validates the (then small and valid) payload again, on the
    loop, with the store as it is at that moment, and writes the search."""

    def valid(raw: bytes, content_type: str | None) -> Any:
        payload = api.decode_json(raw, content_type)
        runtime.service.validate(payload)  # the 400, every problem listed, raised here
        return payload

    with logs.task_context(uuid.uuid4().hex):  # the search's id, from the caller's check on
        ticket = runtime.service.admit(caller_of(request))
        payload = await check_body(request, valid)
        return runtime.service.start(payload, ticket=ticket)


def route(path: str, target: str, *allowed: str) -> Callable[[Endpoint], Route]:
    """A route answering `allowed` methods under `target`'s name (405s and logs say it)."""

    def wrap(answer: Endpoint) -> Route:
        async def handle(request: Request) -> Response:
            with ExitStack() as context:
                try:  # the trace too is read inside the error handling: never a plain 500
                    context.enter_context(logs.request_context(request.headers))  # as functions'
                    context.enter_context(
                        spans.server(
                            f"{request.method} {target}",
                            request.headers,
                            {"http.request.method": request.method, "url.path": request.url.path},
                        )
                    )
                    api.require_method(target, request.method, allowed)
                    runtime: EmbeddedRuntime = request.app.state.runtime
                    return await answer(request, runtime)
                except FanfuseError as exc:
                    return error_response(exc)
                except Exception:
                    log.exception("%s failed", target)
                    return error_response(Unavailable(f"{target} is temporarily unavailable"))

        return Route(path, handle, methods=METHODS, name=f"{target}:{path}")

    return wrap


def answers(*operation_ids: str) -> Callable[[Endpoint], Endpoint]:
    """Make `answer` the endpoint of these operations of the route table (an id the table
    lacks is a KeyError here, at import)."""

    def register(answer: Endpoint) -> Endpoint:
        for operation_id in operation_ids:
            routes.operation(operation_id)
            ENDPOINTS[operation_id] = answer
        return answer

    return register


def api_routes() -> list[Route]:
    """Every route of the table `serve` answers, at its path, under its name (405s and logs say
    it), with its methods and its endpoint."""
    served = routes.served_by("serve")
    missing = [spec.operation_id for spec in served if spec.operation_id not in ENDPOINTS]
    if missing:
        raise RuntimeError(f"serve has no endpoint for the route table's {missing}")
    return [
        route(spec.path, spec.name, *spec.methods)(ENDPOINTS[spec.operation_id]) for spec in served
    ]


def caller_of(request: Request) -> Caller | None:
    """The verified caller (None: anonymous, where settings allow it); else 401/403."""
    auth: Authenticator = request.app.state.auth
    return auth.caller(request.headers)


def task_id_of(request: Request) -> str:
    """`?task_id=` first, else the path's `{task_id}` (as the functions read it)."""
    return api.check_task_id(
        request.query_params.get("task_id") or request.path_params.get("task_id")
    )


@answers("start_search")
async def start_search(request: Request, runtime: EmbeddedRuntime) -> Response:
    accepted = await admitted_start(request, runtime)
    return json_response(accepted, 202, {"Location": accepted.status_url})


@answers("search_status", "search_status_by_query")
async def search_status(request: Request, runtime: EmbeddedRuntime) -> Response:
    """The search's view; and, in the functions' spelling, the routes the table nests under
    `search_status`'s URL (`/search_status/openapi.json`, `/search_status/stats`...), which no
    task id names without `?task_id=`."""
    nested = routes.nested("search_status").get(request.path_params.get("task_id", ""))
    if nested is not None and "task_id" not in request.query_params:
        return await ENDPOINTS[nested.operation_id](request, runtime)
    who = caller_of(request)
    return json_response(visible_status(runtime.service.status, task_id_of(request), who))


def cancel_request(raw: bytes, content_type: str | None) -> api.CancelRequest:
    parsed: api.CancelRequest = api.parse(api.CancelRequest, api.decode_json(raw, content_type))
    return parsed


@answers("cancel_search")
async def cancel_search(request: Request, runtime: EmbeddedRuntime) -> Response:
    who = caller_of(request)
    if "task_id" in request.query_params:
        task_id = api.check_task_id(request.query_params["task_id"])
    else:
        cancel = await check_body(request, cancel_request)
        task_id = api.check_task_id(cancel.task_id)
    visible_status(runtime.service.status, task_id, who)  # 404/410 before anything else
    return json_response(runtime.service.cancel(task_id))


@answers("search")
async def search(request: Request, runtime: EmbeddedRuntime) -> Response:
    """Start and wait: 200 with the terminal document, or 202 with the running one at the cap."""
    accepted = await admitted_start(request, runtime)
    with logs.task_context(accepted.task_id):  # its status reads name it, in its trace
        view = await watch.settle(runtime, accepted.task_id)
    if view.status.terminal:
        return json_response(view)
    return json_response(view, 202, {"Location": accepted.status_url})


class HeldStream(EventSourceResponse):
    """An event stream that holds one of its caller's stream slots (`StreamCap`) for as long
    as it is served, and gives it back however it ends (the search's end, the client leaving,
    the server stopping, an error): Starlette calls a response it was handed, always."""

    def __init__(self, body: AsyncIterator[bytes], release: Callable[[], None]) -> None:
        super().__init__(body, ping=SSE_PING, headers={"Cache-Control": "no-store"})
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


@answers("search_events")
async def search_events(request: Request, runtime: EmbeddedRuntime) -> Response:
    """The search's Server-Sent Events (watch.events). 400/404/410 as JSON before the stream
    starts (a watched search answers them from its latest snapshot, with no read), then 429
    when the caller holds its cap of streams already."""
    who = caller_of(request)
    task_id = task_id_of(request)
    watchers: Watchers = request.app.state.watchers

    def read(task_id: str) -> TaskView:
        return watchers.latest_view(task_id) or runtime.service.status(task_id)

    visible_status(read, task_id, who)
    last_id = watch.parse_last_event_id(request.headers.get("last-event-id"))
    cap: StreamCap = request.app.state.streams
    release = cap.acquire(who)  # the last check: nothing after it can fail before the stream
    return HeldStream(watch.events(runtime, watchers, task_id, last_id=last_id), release)


@answers("stats")
async def stats_figures(request: Request, runtime: EmbeddedRuntime) -> Response:
    """The figures `http.stats_route` lets this caller read: an operator's (Settings.operators, or
    the key this server printed) every owner's, anyone else's their own."""
    state = request.app.state
    query = stats_route.query_for(
        caller_of(request), request.query_params, state.operators, state.operator_keys
    )
    store = runtime.service.store
    # Up to MAX_SEARCHES documents to read and parse (about a second): off the event loop.
    figures = await anyio.to_thread.run_sync(stats_route.collect, store, store, query, utcnow())
    return json_response(figures)


@answers("metrics")
async def metrics(request: Request, runtime: EmbeddedRuntime) -> Response:
    """Prometheus' text format (fronts/serve/metrics.py), for an operator."""
    state = request.app.state
    stats_route.require_operator(caller_of(request), state.operators, state.operator_keys)
    exposed: Metrics = request.app.state.metrics
    return Response(exposed.render(), media_type=CONTENT_TYPE_LATEST)


@answers("platforms")
async def platforms(request: Request, runtime: EmbeddedRuntime) -> Response:
    caller_of(request)  # verified, though every caller gets the same list
    return json_response(runtime.service.platforms())


@route("/", "page", "GET", "HEAD")
async def home(request: Request, runtime: EmbeddedRuntime) -> Response:
    """The search page (page.py): static and public; its calls carry the user's key."""
    return page.index(request)


@route("/page/{name}", "page", "GET", "HEAD")
async def page_file(request: Request, runtime: EmbeddedRuntime) -> Response:
    answer = page.asset(request.path_params["name"])
    return answer or await not_found(request, HTTPException(404))


def deployment_of(runtime: EmbeddedRuntime) -> Deployment:
    """What this server's validation takes from its settings and registry, for its document."""
    return Deployment.of(runtime.settings, runtime.service.catalog)


@answers("openapi")
async def openapi(request: Request, runtime: EmbeddedRuntime) -> Response:
    """The API's document with this server's platforms and limits written in (openapi.py)."""
    return Response(render(deployment_of(runtime)), media_type="application/json")


async def not_found(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (no such route), in the API's error body."""
    if isinstance(exc, HTTPException) and exc.status_code != 404:
        body = {"error": "http_error", "message": str(exc.detail), "problems": []}
        return json_response(body, exc.status_code)
    message = f"no route {request.url.path}; the routes are listed at /openapi.json"
    return json_response({"error": "not_found", "message": message, "problems": []}, 404)


# ---------------------------------------------------------------------------------------------
# The application and its lifespan


def warm_names(registry: Registry, warm: Sequence[str] | None) -> list[str]:
    """`None`: the available offline platforms; else the named ones, each available here."""
    available = registry.available()
    if warm is None:
        return [name for name in OFFLINE if name in available]
    missing = [n for n in warm if n not in available]
    if missing:
        reasons = "; ".join(f"{n}: {registry.unavailable_reason(n)}" for n in missing)
        problem = f"cannot warm {', '.join(missing)} ({reasons})"
        raise InvalidRequest([Problem(field="warm", problem=problem)])
    return list(warm)


async def warm_up(runtime: EmbeddedRuntime, names: Sequence[str]) -> None:
    """One tiny search per platform, so its model and index are loaded before `ready`."""
    params = SearchParams(queries=["warm up"], limit=1)
    for name in names:
        platform = runtime.registry.get(name)
        await platform.search(PlatformContext(settings=platform.settings()), params)
        log.info("warmed %s", name)


@contextmanager
def local_key(store: KeyStore, on_key: Callable[[str], None] | None) -> Iterator[frozenset[str]]:
    """A key for owner `local` while the server runs: created, handed to `on_key`, revoked at
    the end (a key that was printed should not outlive the process that printed it). Yields
    the ids of the keys that are this server's operators: that key's alone (none without it),
    so that another key of owner `local` is no operator."""
    if on_key is None:
        yield frozenset()
        return
    plaintext, record = keys.new_key(keys.LOCAL_OWNER, "fanfuse serve", None, None, utcnow())
    store.put_key(record)
    on_key(plaintext)
    try:
        yield frozenset({record.key_id})
    finally:
        store.put_key(keys.revoked(record, utcnow()))


def create_app(
    settings: Settings,
    *,
    registry: Registry | None = None,
    warm: Sequence[str] | None = None,
    on_key: Callable[[str], None] | None = None,
) -> Starlette:
    """The application over one EmbeddedRuntime on `settings`, entered by its lifespan.

    `warm`: the platforms to load at startup (None: the available offline ones; []: none).
    `on_key`: given the local key created at start-up (None: no key is created).
    `settings.function_urls` should name this server's own routes, so that the service builds
    `status_url` and `cancel_url` pointing back here (`server.settings_for`).
    """
    registry = registry or Registry.from_settings(settings)
    names = warm_names(registry, warm)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with EmbeddedRuntime(settings, registry=registry, resident=True) as runtime:
            await warm_up(runtime, names)
            app.state.runtime = runtime
            app.state.auth = Authenticator(settings, runtime.service.store)
            app.state.checking = anyio.CapacityLimiter(1)  # the body-checking thread
            app.state.watchers = for_service(runtime.service)  # one watcher per search
            app.state.streams = StreamCap(settings.max_streams_per_caller)
            app.state.operators = settings.operators
            app.state.metrics = Metrics(runtime.service.events.source, runtime.service.store)
            app.state.metrics.registry.register(Streams(app.state.watchers, app.state.streams))
            app.state.metrics.install()
            try:
                with local_key(runtime.service.store, on_key) as printed:
                    app.state.operator_keys = printed  # who started it reads all
                    yield
            finally:
                app.state.metrics.uninstall()

    return Starlette(
        routes=[*api_routes(), home, page_file],
        lifespan=lifespan,
        exception_handlers={404: not_found},
    )
