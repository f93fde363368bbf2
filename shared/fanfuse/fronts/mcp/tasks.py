"""MCP Tasks (`io.modelcontextprotocol/tasks`, SEP-2663, schema 2026-07-28): `search` as a task.

A client that declares the extension in a request's capabilities gets, for a `search` call, a
task handle at once (`resultType: "task"`) instead of waiting for the fused results; it then
polls `tasks/get` (status, the progress message, and once over the very result a synchronous
`search` gives) and may `tasks/cancel`. Every other tool, and every client that does not
declare the extension (or speaks a protocol version before 2026-07-28, whose task shapes are
another extension's), gets today's answer unchanged.

The MCP task IS the fanfuse search: its `taskId` is the search's task id, and nothing about it
is held in this process. `tasks/get` reads the search through the same `SearchBackend` the
tools use, so a task survives the MCP server restarting (the embedded runtime's SQLite file,
whose resident runtime resumes the search; or a deployed stack), and it belongs to the caller
that started it: `tasks/get`, `tasks/update` and `tasks/cancel` act for the request's caller
(fronts/mcp/access.py), and another caller's task is "not found" (-32602), exactly as an
unknown id, so a task id seen elsewhere tells nothing and opens nothing.

Statuses: pending and running are `working`; completed, partial and failed are `completed`
with the `search` tool's result (a failed search is a tool result with a failure in it, as the
synchronous `search` answers it, not a JSON-RPC error: the spec keeps `failed` for those);
cancelled is `cancelled`. fanfuse never asks a client for input, so a task is never
`input_required` and `tasks/update` is acknowledged with nothing to apply.

Notifications: a client may open `subscriptions/listen` with `notifications.taskIds`; the
server agrees to the ids that are the caller's own (the acknowledgement lists them), then sends
`notifications/tasks` (the DetailedTask `tasks/get` would give) each time one changes status
(one already over: at once), so at the latest on completion, on the listen request's own
stream (stdio, or streamable HTTP's SSE answer). A stream that asked for tasks only ends once
they are all over. Every listen stream on one search reads that search's one watcher
(`fanfuse.http.streams`: a cheap change marker polled, the search read once per change for all
of them), and a caller holds at most `Settings.max_streams_per_caller` listen streams at once:
one more is refused with `RATE_LIMITED` and the seconds to wait in its data.

The SDK's `Extension` contract (mcp.server.extension) is written for `MCPServer`; fanfuse's
server is the low-level `Server` (its tool schemas come from the request model), so `install`
applies the extension the way `MCPServer` does: its methods as request handlers, its settings
under `capabilities.extensions`, its interceptor folded around `tools/call`. Two things the
contract has no place for are done beside it: `subscriptions/listen` is a spec method, which an
extension may not bind (`MethodBinding` refuses it) and whose SDK handler (`ListenHandler`)
knows only the core event kinds, so `install` registers `TaskListen` for it on the low-level
server; and `notifications/tasks` is not in the SDK's closed `ServerNotification` union, so it
is sent as a model of its own through the session (which only serializes it).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, Literal, cast

import anyio
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, compose_tool_call_handler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    CallToolRequestParams,
    RequestParams,
    ServerNotification,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)
from mcp_types.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from fanfuse.fronts.mcp import access
from fanfuse.fronts.mcp.digest import digest
from fanfuse.fronts.mcp.tools import of_view, tool_error
from fanfuse.http.backend import EmbeddedBackend, SearchBackend
from fanfuse.http.streams import StreamCap, Watchers, for_service
from fanfuse.settings import Settings
from fanfuse.wire.errors import FanfuseError, TooManyStreams
from fanfuse.wire.models import Caller, TaskStatus, TaskView

EXTENSION_ID = "io.modelcontextprotocol/tasks"
TASK_TOOLS = frozenset({"search"})
"""The tools answered with a task handle: `search` is the one that waits. start_search already
returns at once, and the others answer from one read."""
POLL_INTERVAL_MS = 500
"""The `pollIntervalMs` hint: a search's platforms report about this often (the progress
throttle), and most searches take seconds, so polling faster reads the same document."""
WATCH_INTERVAL_S = 0.25
"""How often a watched task is polled (once for every listen stream on it): a status change is
pushed within this."""
MAX_WATCHED = 100
"""Task ids one listen stream may ask for; more is refused as invalid params."""
DEFAULT_STREAMS: int = Settings.model_fields["max_streams_per_caller"].default
"""The cap when the server is built without one (a test's): the setting's default."""
RATE_LIMITED = -32029
"""A listen stream past its caller's cap: a server error code (JSON-RPC leaves -32000 to -32099
to implementations; MCP defines none for this), HTTP's 429 in its last digits; its data says
`retryAfterSeconds`."""

log = logging.getLogger(__name__)
FAILED = "Failed to retrieve task"

ToolCall = Callable[[ServerRequestContext[Any], CallToolRequestParams], Awaitable[HandlerResult]]


class _Over(Exception):
    """tasks/cancel of a task already over: acknowledged, not an error."""


class TaskIdParams(RequestParams):
    """`tasks/get` and `tasks/cancel`: `{taskId}`."""

    task_id: str = Field(alias="taskId", min_length=1)


class TaskUpdateParams(TaskIdParams):
    """`tasks/update`: `{taskId, inputResponses}`; fanfuse asks for no input."""

    input_responses: dict[str, Any] = Field(alias="inputResponses", default_factory=dict)


def declared(ctx: ServerRequestContext[Any]) -> bool:
    """Whether this request's client declared the extension on a 2026-07-28+ connection (where
    capabilities travel with each request; SEP-2663 lets a task answer only such a request)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities else None
    return bool(extensions) and EXTENSION_ID in (extensions or {})


def _require(ctx: ServerRequestContext[Any]) -> None:
    """tasks/* from a client that did not declare the extension: -32021, as the spec says."""
    if not declared(ctx):
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message=f"Client did not declare required extension {EXTENSION_ID!r}",
            data={"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}},
        )


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def task_status(status: TaskStatus) -> str:
    if status is TaskStatus.CANCELLED:
        return "cancelled"
    return "completed" if status.terminal else "working"


def detailed_task(view: TaskView) -> dict[str, Any]:
    """The search as a DetailedTask: status, its message, and once completed the result the
    synchronous `search` tool gives for the same view."""
    status = task_status(view.status)
    ttl = view.expires_at - view.created_at
    task: dict[str, Any] = {
        "taskId": view.task_id,
        "status": status,
        "statusMessage": digest(view).message,
        "createdAt": _iso(view.created_at),
        "lastUpdatedAt": _iso(view.updated_at),
        "ttlMs": max(0, int(ttl.total_seconds() * 1000)),
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if status == "completed":
        result = of_view(view).model_dump(by_alias=True, mode="json", exclude_none=True)
        task["result"] = {"resultType": "complete", **result}
    return task


class SearchTasks(Extension):
    """The Tasks extension over a SearchBackend; `gated`: requests carry a verified caller."""

    identifier = EXTENSION_ID

    def __init__(
        self, backend: SearchBackend, gated: bool = False, streams: StreamCap | None = None
    ) -> None:
        self.backend = backend
        self.gated = gated
        self.streams = streams or StreamCap(DEFAULT_STREAMS)
        self.watchers = watchers_of(backend)

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", TaskIdParams, self.get),
            MethodBinding("tasks/update", TaskUpdateParams, self.update),
            MethodBinding("tasks/cancel", TaskIdParams, self.cancel),
        )

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        if params.name not in TASK_TOOLS or not declared(ctx):
            return await call_next(ctx)
        try:
            caller = access.caller_of(ctx.request, self.gated)
            accepted = await self.backend.start(dict(params.arguments or {}), caller)
            view = await self.backend.status(accepted.task_id, caller)
        except FanfuseError as exc:  # refused as `search` refuses it: a tool error
            return tool_error(str(exc))
        except Exception as exc:  # as Tools.call: a bug answers, it does not drop the connection
            log.exception("search as a task failed")
            return tool_error(f"internal error: {type(exc).__name__}: {exc}")
        # Durably created: the start wrote the search to the store before answering.
        return {"resultType": "task", **_summary(detailed_task(view))}

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> HandlerResult:
        _require(ctx)
        return await self.view(ctx, params.task_id, read=True)

    async def update(
        self, ctx: ServerRequestContext[Any, Any], params: TaskUpdateParams
    ) -> HandlerResult:
        _require(ctx)
        await self.view(ctx, params.task_id, read=True)  # not found is an error here too
        return {}

    async def cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams
    ) -> HandlerResult:
        """Acknowledged, also for a task already over (the spec's cancellation is cooperative
        and may end in another terminal status); not found is an error."""
        _require(ctx)
        with contextlib.suppress(_Over):
            await self.view(ctx, params.task_id, read=False)
        return {}

    async def view(
        self, ctx: ServerRequestContext[Any, Any], task_id: str, *, read: bool
    ) -> dict[str, Any]:
        """The caller's task, read or cancelled; anyone else's, or none: -32602 not found (so
        is an expired one, to its owner); a store or stack that fails: -32603."""
        try:
            caller: Caller = access.caller_of(ctx.request, self.gated)
            if read:
                view = await self.backend.status(task_id, caller)
            else:
                view = await self.backend.cancel(task_id, caller)
        except FanfuseError as exc:  # the embedded service's, or the stack's answer (ApiError)
            if exc.status_code == 409 and not read:  # cancelling a search already over
                raise _Over from None
            if exc.status_code == 404:  # no such search, or another caller's
                raise MCPError(INVALID_PARAMS, f"{FAILED}: Task not found") from None
            if exc.status_code == 410:  # expired (shown to its owner only)
                raise MCPError(INVALID_PARAMS, f"{FAILED}: Task has expired") from None
            raise MCPError(INTERNAL_ERROR, f"{FAILED}: {exc}") from None
        return detailed_task(view)


def _summary(task: dict[str, Any]) -> dict[str, Any]:
    """A CreateTaskResult carries the Task fields only (no inlined result): a search done before
    the first read still hands back a handle, and tasks/get gives the result."""
    return {k: v for k, v in task.items() if k != "result"}


class TaskStatusNotification(BaseModel):
    """`notifications/tasks`: the DetailedTask, with the listen stream's subscription id."""

    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: dict[str, Any]


_TASK_IDS: TypeAdapter[list[str]] = TypeAdapter(list[str])


def watchers_of(backend: SearchBackend) -> Watchers:
    """The watchers of the listen streams over `backend`: the service's own (its store's change
    marker) in this process, else the stack's status read once per interval for all streams.
    They read every caller's tasks: a stream is only given tasks its caller was agreed to."""
    if isinstance(backend, EmbeddedBackend):
        return for_service(backend.runtime.service, WATCH_INTERVAL_S)

    async def read(task_id: str) -> TaskView:
        return await backend.status(task_id, None)

    return Watchers(read, interval=WATCH_INTERVAL_S)


class TaskListen:
    """Serves `subscriptions/listen` with the extension's `taskIds` filter (and the core kinds,
    which fanfuse never fires: agreed to, as the SDK's ListenHandler does, and silent)."""

    def __init__(self, tasks: SearchTasks) -> None:
        self.tasks = tasks

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        """One listen stream, counted against its caller's cap while it lasts."""
        try:
            release = self.tasks.streams.acquire(access.caller_of(ctx.request, self.tasks.gated))
        except TooManyStreams as exc:
            data = {"retryAfterSeconds": exc.retry_after_s}
            raise MCPError(RATE_LIMITED, str(exc), data=data) from None
        except FanfuseError as exc:  # behind the gate without a verified caller
            raise MCPError(INVALID_REQUEST, str(exc)) from None
        try:
            return await self.listen(ctx, params)
        finally:
            release()

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        requested = params.notifications
        asked = (requested.model_extra or {}).get("taskIds")
        if asked is not None:
            _require(ctx)
        try:
            task_ids = list(dict.fromkeys(_TASK_IDS.validate_python(asked or [])))
        except ValidationError:
            raise MCPError(INVALID_PARAMS, "notifications.taskIds: a list of strings") from None
        if len(task_ids) > MAX_WATCHED:
            raise MCPError(INVALID_PARAMS, f"notifications.taskIds: at most {MAX_WATCHED}")
        if ctx.request_id is None:
            raise MCPError(INVALID_PARAMS, "subscriptions/listen requires a request id")
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        watched: dict[str, dict[str, Any]] = {}  # the caller's own tasks, as last seen
        for task_id in task_ids:
            try:
                watched[task_id] = await self.tasks.view(ctx, task_id, read=True)
            except MCPError:  # not the caller's, or no such task: not agreed to
                continue
        core = {
            k: v
            for k, v in requested.model_dump(exclude_none=True).items()
            if k != "taskIds" and v not in (False, [])
        }
        agreed = {} if asked is None else {"taskIds": list(watched)}
        honored = SubscriptionFilter.model_validate({**core, **agreed})
        await ctx.session.send_notification(
            SubscriptionsAcknowledgedNotification(
                params=SubscriptionsAcknowledgedNotificationParams(
                    notifications=honored, _meta=meta
                )
            ),
            related_request_id=ctx.request_id,
        )
        for task in watched.values():  # over already: told at once, the stream has nothing else
            if task["status"] != "working":
                await self._notify(ctx, {**task, "_meta": meta})
        live = [t for t, task in watched.items() if task["status"] == "working"]
        async with anyio.create_task_group() as group:
            for task_id in live:
                group.start_soon(self._follow, ctx, meta, task_id)
        if core or asked is None:  # other kinds: the stream stays until the client leaves
            await anyio.sleep_forever()
        return SubscriptionsListenResult(_meta=meta)

    async def _follow(
        self, ctx: ServerRequestContext[Any, Any], meta: dict[str, Any], task_id: str
    ) -> None:
        """Tell this stream each change of `task_id`'s status until it is over (or gone), from
        the task's shared watch: the DetailedTask is made once per change for every stream."""
        seen = "working"
        version = 0
        async with self.tasks.watchers.watch(task_id) as watch:
            while seen == "working":
                snapshot = await watch.next(version)
                version = snapshot.version
                view = snapshot.view
                if view is None:  # expired or gone meanwhile: nothing more to tell
                    return
                if task_status(view.status) != seen:
                    task = snapshot.derive("mcp task", functools.partial(detailed_task, view))
                    await self._notify(ctx, {**task, "_meta": meta})
                    seen = task["status"]

    @staticmethod
    async def _notify(ctx: ServerRequestContext[Any, Any], params: dict[str, Any]) -> None:
        note = TaskStatusNotification(params=params)
        await ctx.session.send_notification(
            cast(ServerNotification, note), related_request_id=ctx.request_id
        )


def install(server: Server[Any], extension: SearchTasks, call_tool: ToolCall) -> None:
    """Apply `extension` to a low-level server as `MCPServer(extensions=[...])` does (its
    methods, its advertised settings, its interceptor around `call_tool`), and serve
    `subscriptions/listen` with its task ids (`TaskListen`)."""
    for method in extension.methods():
        server.add_request_handler(method.method, method.params_type, method.handler)
    server.extensions[extension.identifier] = extension.settings()
    server.add_request_handler(
        "tools/call", CallToolRequestParams, compose_tool_call_handler([extension], call_tool)
    )
    server.add_request_handler(
        "subscriptions/listen", SubscriptionsListenRequestParams, TaskListen(extension)
    )
