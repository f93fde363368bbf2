"""The HTTP API's routes, written once: the table every front and the OpenAPI document read.

A route is one operation at one path: its operation id, the methods it answers, which fronts
answer it, what it takes (parameters, a body) and what it answers (its models, its error
statuses, the links a started search's id leads to). From `ROUTES`:

- `fanfuse serve` mounts its routes (fronts/serve/app.py: one endpoint per operation id; a
  route served there with no endpoint fails the app's creation, an endpoint for an operation
  the table lacks fails the import);
- the Cloud Functions' public targets are `PUBLIC_TARGETS`, each answering the methods of its
  routes (`methods_of`), and `search_status` answers the routes nested under its URL
  (`nested`: `{search_status URL}/stats`...) (fronts/functions.py); `serve` answers them
  under that spelling too;
- the Lambda's HTTP function routes `/{target}` to the same public targets
  (fronts/aws_lambda/front.py), API Gateway forwarding every `/{target}` and `/{target}/...`
  to it (infra/aws/api.tf);
- the OpenAPI document's `paths` are rendered from it (http/openapi.py: the models of its
  bodies and answers are the document's schemas), and the functions' own document keeps the
  paths a function answers, each at its function's URL (http/deployment.py).

What is written elsewhere for a reason is checked against the table by
tests/unit/http/test_route_table.py: functions/main.py's entry points (functions-framework needs one
decorated function per target, named as the target), Terraform's function lists (infra/main.tf,
infra/aws/lambda.tf) and the deployment rehearsal's (scripts/fanfuse_deploy/render.py) name
`FUNCTION_TARGETS` and `PUBLIC_TARGETS`; and serve's, the functions' and the Lambda's answers
match the table route by route (the local stack's targets are `FUNCTION_TARGETS` itself).

Fronts. `target` is the function that answers a route on a function deployment (the Cloud
Functions, and the Lambda, which runs the same targets): the three public calls at their own
names, and `search_status` for the routes nested under its URL. `serve` says whether
`fanfuse serve` answers it: every route today, those without a target alone (what only a
resident process can offer: `x-fanfuse-only: serve` in the document).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from fanfuse.http.api import CancelRequest
from fanfuse.http.deliveries import MESSAGES
from fanfuse.http.stats_route import MAX_PARAMETER_CHARS
from fanfuse.wire.models import Accepted, PlatformInfo, SearchRequest, TaskView
from fanfuse.wire.stats_report import WINDOW_PATTERN, Stats

Front = Literal["serve", "functions"]
READ = ("GET", "HEAD")
WRITE = ("POST",)
JSON = "application/json"
EVENT_STREAM = "text/event-stream"
TEXT = "text/plain"
AUTH = (401, 403)
"""What every route but a public one may answer: `fanfuse.auth.callers` verifies the caller."""

EXAMPLE_TASK_ID = "5f0c6a4e9b2d4c71a3e8d2b6f4a1c9e7"
"""A task id as the service makes them (uuid4 hex); no search has it (404)."""
SEARCH_EXAMPLE = {"query": ["microwave waveguide", "dielectric constant"], "max_results": 5}
"""What a request looks like (and what schemathesis' examples phase sends): valid on any
deployment, since `platform` is left to its default, every available platform."""


@dataclass(frozen=True)
class Parameter:
    """A parameter as a route reads it: one named `task_id` is a task id (what
    `api.check_task_id` accepts, the document says with its schema), any other a string."""

    name: str
    where: Literal["path", "query", "header"]
    description: str | None = None
    required: bool = False
    pattern: str | None = None
    max_length: int | None = None
    example: str | None = None


@dataclass(frozen=True)
class Body:
    """A route's JSON body: its model (validated, so the document gives its input schema) and
    the example the document shows."""

    model: type[BaseModel]
    example: dict[str, Any]


@dataclass(frozen=True)
class Success:
    """One successful answer: its status, its media type and model (a JSON body of `model`, a
    list of them when `many`, any JSON object when there is none), whether it names the search
    in a `Location` header, and whether it carries the links a search's task id leads to."""

    status: int
    description: str
    model: type[BaseModel] | None = None
    many: bool = False
    media: str = JSON
    location: bool = False
    links: bool = False


@dataclass(frozen=True)
class Route:
    """One operation at one path (see the module for what reads each field). `errors`: the
    error statuses it answers besides `AUTH`, which every route but a `public` one answers.
    `link`: the name of the link that leads from a started search to this route."""

    path: str
    operation_id: str
    methods: tuple[str, ...]
    summary: str
    answers: tuple[Success, ...]
    errors: tuple[int, ...] = ()
    description: str | None = None
    parameters: tuple[Parameter, ...] = ()
    body: Body | None = None
    target: str | None = None
    serve: bool = True
    public: bool = False
    link: str | None = None

    @property
    def fronts(self) -> frozenset[Front]:
        served: set[Front] = {"serve"} if self.serve else set()
        return frozenset(served | ({"functions"} if self.target else set()))

    @property
    def statuses(self) -> tuple[int, ...]:
        """Every error status, the caller's verification's first."""
        return self.errors if self.public else (*AUTH, *self.errors)

    @property
    def name(self) -> str:
        """What a 405 and the logs call the route on `serve`: the function's name for a route
        at the function's own path (`/search_status` and `/search_status/{task_id}` are both
        `search_status`), else its operation id."""
        at_own_path = self.target is not None and (
            self.path == f"/{self.target}" or self.path.startswith(f"/{self.target}/")
        )
        return self.target if at_own_path and self.target else self.operation_id


TASK_ID_IN_PATH = Parameter("task_id", "path", required=True)
STATUS = Success(200, "the search with its platforms' live progress", TaskView)

ROUTES: tuple[Route, ...] = (
    Route(
        "/start_search",
        "start_search",
        WRITE,
        "Start a search; poll its status_url",
        body=Body(SearchRequest, SEARCH_EXAMPLE),
        answers=(Success(202, "accepted", Accepted, location=True, links=True),),
        errors=(400, 405, 413, 415, 429, 503),
        target="start_search",
    ),
    Route(
        "/search_status/{task_id}",
        "search_status",
        READ,
        "The search's status (status_url)",
        parameters=(TASK_ID_IN_PATH,),
        answers=(STATUS,),
        errors=(400, 404, 405, 410, 503),
        target="search_status",
        link="status",
    ),
    Route(
        "/search_status",
        "search_status_by_query",
        READ,
        "The search's status, by `?task_id=`",
        parameters=(Parameter("task_id", "query", required=True),),
        answers=(STATUS,),
        errors=(400, 404, 405, 410, 503),
        target="search_status",
        link="status_by_query",
    ),
    Route(
        "/cancel_search",
        "cancel_search",
        WRITE,
        "Cancel a search: body `{task_id}` or `?task_id=` (cancel_url)",
        description="The search is named by the body `{task_id}`, or by `?task_id=` (the form "
        "`cancel_url` takes, POSTed as it is): given, the query's id is the one cancelled and "
        "the body is not read, so it may be left out. Neither is a 400 naming `body`. The "
        "document says the body is required, as one operation cannot say `one of a parameter "
        "or a body`: the body is the form it describes whole.",
        parameters=(
            Parameter("task_id", "query", description="the id, instead of the body's (cancel_url)"),
        ),
        body=Body(CancelRequest, {"task_id": EXAMPLE_TASK_ID}),
        answers=(Success(200, "the cancelled search", TaskView),),
        errors=(400, 404, 405, 409, 410, 413, 415, 503),
        target="cancel_search",
        link="cancel",
    ),
    Route(
        "/search",
        "search",
        WRITE,
        "Search and wait: the final document in one call",
        description="Waits until the search is terminal, at most its deadline (timeout_s or the "
        "deployment's) plus a few seconds; past that cap it answers 202 with the running "
        "document and a Location to poll.",
        body=Body(SearchRequest, SEARCH_EXAMPLE),
        answers=(
            Success(200, "the terminal search", TaskView, links=True),
            Success(202, "still running at the cap", TaskView, location=True, links=True),
        ),
        errors=(400, 405, 413, 415, 429, 503),
    ),
    Route(
        "/search_status/{task_id}/events",
        "search_events",
        ("GET",),
        "Server-Sent Events of the search's progress",
        description="`event: progress` with the TaskView JSON on each change, then one `event: "
        "done` with the terminal document (or `event: timeout` with the last one when the "
        "deadline passes first); then the stream closes. Each event's id names the state it "
        "carries: a client reconnecting with `Last-Event-ID` gets the current state at once if "
        "it is newer than that id, then the live stream (a terminal search: its `done` event).",
        parameters=(
            TASK_ID_IN_PATH,
            Parameter(
                "Last-Event-ID",
                "header",
                description="the id of the last event received (an id this stream did not send "
                "is ignored: the current state is sent)",
            ),
        ),
        answers=(
            Success(200, "the event stream; the schema is that of one event", media=EVENT_STREAM),
        ),
        errors=(400, 404, 405, 410, 429),
        link="events",
    ),
    Route(
        "/platforms",
        "platforms",
        READ,
        "The platforms, which are available here, and why the others are not (functions: GET "
        "{search_status URL}/platforms)",
        answers=(Success(200, "one entry per platform", PlatformInfo, many=True),),
        errors=(405,),
        target="search_status",
    ),
    Route(
        "/stats",
        "stats",
        READ,
        "Per platform figures over recent searches (functions: GET {search_status URL}/stats): "
        "an operator's of every owner, anyone else's own",
        parameters=(
            Parameter(
                "window",
                "query",
                "how far back: 30m, 24h (default), 7d; longer reads 30d",
                pattern=WINDOW_PATTERN,
                max_length=MAX_PARAMETER_CHARS,
                example="24h",
            ),
            Parameter(
                "owner",
                "query",
                "an operator's: one owner's searches (a caller subject)",
                max_length=MAX_PARAMETER_CHARS,
            ),
        ),
        answers=(Success(200, "the figures (aggregates only)", Stats),),
        errors=(400, 405, 503),
        target="search_status",
    ),
    Route(
        "/metrics",
        "metrics",
        READ,
        "Prometheus metrics of this server, for an operator",
        answers=(Success(200, "Prometheus text format 0.0.4", media=TEXT),),
        errors=(405,),
    ),
    Route(
        "/openapi.json",
        "openapi",
        READ,
        "This document (functions: GET {search_status URL}/openapi.json)",
        answers=(Success(200, "OpenAPI 3.1"),),
        target="search_status",
        public=True,
    ),
)


def operation(operation_id: str) -> Route:
    """The route of an operation id (KeyError: the table has none)."""
    for route in ROUTES:
        if route.operation_id == operation_id:
            return route
    raise KeyError(f"no route has the operation id {operation_id!r}")


def served_by(front: Front) -> tuple[Route, ...]:
    return tuple(route for route in ROUTES if front in route.fronts)


PUBLIC_TARGETS: tuple[str, ...] = tuple(
    dict.fromkeys(route.target for route in ROUTES if route.target is not None)
)
"""The public calls, named as the functions are: `serve` answers them under the same names."""
FUNCTION_TARGETS: tuple[str, ...] = (*PUBLIC_TARGETS, *MESSAGES)
"""Every function of a function deployment: the public targets, then the task targets (their
deliveries are `http.deliveries`', no route: a queue calls them, never a client)."""


def routes_of(target: str) -> tuple[Route, ...]:
    """The routes the function `target` answers."""
    return tuple(route for route in ROUTES if route.target == target)


def methods_of(target: str) -> tuple[str, ...]:
    """The methods the function `target` answers: those of each of its routes (one function
    checks the method before it knows which of its routes a path is, so they are the same)."""
    return routes_of(target)[0].methods


def nested(target: str) -> dict[str, Route]:
    """The routes the function `target` answers under its URL (`{search_status URL}/stats`),
    by the path's last segment: a function's other routes are at its own path."""
    return {
        route.path.rsplit("/", 1)[-1]: route for route in routes_of(target) if route.name != target
    }
