"""The five MCP tools, declared from the request model and run against a SearchBackend.

`start_search` and `search` take exactly the HTTP API's request: their input schema is
SearchRequest's own JSON schema (a field added to the model appears here with its default,
limits and description), and the arguments go to the service's validation unchanged, so a bad
one is refused with the API's message naming the field. Every failure a caller can act on
comes back as a tool error (`isError`, the message as text), never as a protocol error.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.json_schema import JsonSchemaMode

from fanfuse.fronts.mcp.digest import Digest, digest, markdown
from fanfuse.http.backend import Platforms, SearchBackend
from fanfuse.service.polling import until_terminal
from fanfuse.wire.errors import FanfuseError, InvalidRequest, problems_of
from fanfuse.wire.models import Accepted, Caller, TaskView
from fanfuse.wire.request import SearchRequest

log = logging.getLogger(__name__)

Report = Callable[[float, str], Awaitable[None]]
"""Sends one progress notification: percent (of 100) and the merged progress message."""

FINALIZE_GRACE = 2.0
"""`search` waits this long past the search's budget: the deadline's aggregate finalizes it
a moment after the budget runs out, and a stack's queue adds its own delay."""


class TaskRef(BaseModel):
    """The argument of get_search_status and cancel_search."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(min_length=1, description="the task_id start_search (or search) gave")


class NoArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _schema(model: type[BaseModel], mode: JsonSchemaMode = "validation") -> dict[str, Any]:
    """Inputs in validation mode (what a caller may send), outputs in serialization mode (what
    `model_dump(mode="json")` writes, which the client checks against the output schema)."""
    return model.model_json_schema(mode=mode)


def tool_list(max_wait: float) -> list[Tool]:
    request = _schema(SearchRequest)
    digest_out = _schema(Digest, "serialization")
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=True)
    return [
        Tool(
            name="search",
            description="Search every selected platform at once and return the fused results, "
            "one numbered list per query (up to 5 queries). Waits up to the request's "
            f"timeout_s (at most {max_wait:g} s here); a search still running then is "
            "returned with its task_id for get_search_status. Sends progress notifications. "
            'A platform may be a fallback chain ("google|brave": brave answers when google '
            "cannot; hedge_after_s asks brave too when google is slow). "
            "A client declaring MCP Tasks (io.modelcontextprotocol/tasks) gets a task at once "
            "instead, for tasks/get.",
            input_schema=request,
            output_schema=digest_out,
            annotations=reads,
        ),
        Tool(
            name="start_search",
            description="Start a search and return its task_id at once; follow it with "
            "get_search_status. Same arguments as search.",
            input_schema=request,
            output_schema=_schema(Accepted, "serialization"),
            annotations=ToolAnnotations(open_world_hint=True),
        ),
        Tool(
            name="get_search_status",
            description="A search's progress (percent, each platform's state and message); "
            "once it is over, its fused results; and its timeline (per platform: queued, "
            "started, first result, each stage's seconds, finished; the fan-in and the "
            "finalization), to see where its time went.",
            input_schema=_schema(TaskRef),
            output_schema=digest_out,
            annotations=ToolAnnotations(read_only_hint=True),
        ),
        Tool(
            name="cancel_search",
            description="Cancel a running search; its platforms stop between stages.",
            input_schema=_schema(TaskRef),
            output_schema=digest_out,
            annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False),
        ),
        Tool(
            name="list_platforms",
            description="The platforms this server can search, and why the others are not "
            'available. "all" (the default platform) means every available one.',
            input_schema=_schema(NoArguments),
            output_schema=_schema(Platforms, "serialization"),
            annotations=ToolAnnotations(read_only_hint=True),
        ),
    ]


def started(task_id: str) -> str:
    return f'Started search {task_id}: call get_search_status with task_id "{task_id}".'


def tool_error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def answer(text: str, structured: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=structured.model_dump(mode="json"),
    )


def of_view(view: TaskView, with_timeline: bool = False) -> CallToolResult:
    """`with_timeline`: get_search_status's text carries the timeline too (its structured
    result always does), for a model asking where a search's time went."""
    d = digest(view)
    return answer(markdown(d, with_timeline), d)


class Tools:
    """Runs a tool call; `max_wait` caps how long `search` waits, whatever the request asks."""

    def __init__(self, backend: SearchBackend, max_wait: float) -> None:
        self.backend = backend
        self.max_wait = max_wait

    async def call(
        self, name: str, arguments: dict[str, Any] | None, report: Report, caller: Caller
    ) -> CallToolResult:
        """Run tool `name` for `caller` (fronts/mcp/access.py), who owns what it starts and sees
        only its own searches."""
        args = dict(arguments or {})
        try:
            if name == "search":
                return of_view(await self.search(args, report, caller))
            if name == "start_search":
                accepted = await self.backend.start(args, caller)
                return answer(started(accepted.task_id), accepted)
            if name == "get_search_status":
                return of_view(await self.backend.status(_ref(args).task_id, caller), True)
            if name == "cancel_search":
                return of_view(await self.backend.cancel(_ref(args).task_id, caller))
            if name == "list_platforms":
                _validated(NoArguments, args)
                return _platforms(await self.backend.platforms())
        except FanfuseError as exc:
            return tool_error(str(exc))
        except Exception as exc:  # a tool answers; a bug must not drop the connection
            log.exception("tool %s failed", name)
            return tool_error(f"internal error: {type(exc).__name__}: {exc}")
        return tool_error(f"unknown tool {name!r}")

    async def search(self, args: dict[str, Any], report: Report, caller: Caller) -> TaskView:
        """Start, then poll until terminal or the bound; progress on each change.

        When the caller cancels the call, the search is cancelled too: nobody will read it.
        """
        accepted = await self.backend.start(args, caller)
        task_id = accepted.task_id
        sent: tuple[float, str] | None = None
        latest: TaskView | None = None

        async def fetch() -> TaskView:
            nonlocal sent, latest
            latest = view = await self.backend.status(task_id, caller)
            percent = max(view.progress.percent, sent[0] if sent else 0.0)  # never backwards
            if (percent, view.progress.message) != sent:
                sent = (percent, view.progress.message)
                await report(percent, view.progress.message)
            return view

        first = await fetch()
        budget = min(first.request.timeout_s or self.max_wait, self.max_wait) + FINALIZE_GRACE
        try:
            with anyio.move_on_after(budget):  # then: the latest view, still running
                await until_terminal(fetch, interval=self.backend.poll)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._cancel_quietly(task_id, caller)
            raise
        return latest or first

    async def _cancel_quietly(self, task_id: str, caller: Caller) -> None:
        try:
            await self.backend.cancel(task_id, caller)
        except FanfuseError as exc:  # already over, or the stack is gone: nothing to stop
            log.info("cancelling %s after the call was cancelled: %s", task_id, exc)


def _validated(model: type[BaseModel], args: dict[str, Any]) -> Any:
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        raise InvalidRequest(problems_of(exc)) from None


def _ref(args: dict[str, Any]) -> TaskRef:
    ref: TaskRef = _validated(TaskRef, args)
    return ref


def _platforms(found: Platforms) -> CallToolResult:
    lines = [
        f"- {p.name}: "
        + ("available" if p.available else f"not available ({p.reason})")
        + (f"; falls back to {'|'.join(p.fallbacks)}" if p.fallbacks else "")
        for p in found.platforms
    ]
    if found.note:
        lines.append(found.note)
    return answer("\n".join(lines), found)
