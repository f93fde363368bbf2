"""A client of the HTTP API: start a search, then poll its status_url until it is terminal.

Every way the API can fail to answer becomes a FanfuseError naming the address (`Unreachable`,
`Unavailable`) or carrying the API's error body (`ApiError`), so a caller, `fanfuse search
--endpoint` first, can say what went wrong in one line without knowing httpx.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
from pydantic import BaseModel

from fanfuse.service.polling import until_terminal
from fanfuse.wire.errors import ApiError, Unavailable, Unreachable
from fanfuse.wire.models import Accepted, ErrorBody, TaskView

M = TypeVar("M", bound=BaseModel)

KEEPALIVE_EXPIRY = 1.0
"""Seconds an idle connection stays in the pool: less than the server's own keep-alive, so the
client, not the server, ends an idle connection. gunicorn (functions-framework's server: the
local stack's functions) closes one after 2 s idle, a default functions-framework does not let
us change; a request sent on a connection at the moment the server closes it is lost to a
connection reset, which a load run of 16 pollers met a few times per 200 searches. Reopening a
loopback (or kept-warm) connection after a second of silence costs next to nothing."""


def api_http(timeout: float, max_connections: int = 100) -> httpx.AsyncClient:
    """The connection pool every caller of the API uses (see KEEPALIVE_EXPIRY): at most
    `max_connections` (httpx's default), each of which may stay open while idle."""
    limits = httpx.Limits(
        max_connections=max_connections,
        max_keepalive_connections=max_connections,
        keepalive_expiry=KEEPALIVE_EXPIRY,
    )
    return httpx.AsyncClient(timeout=timeout, limits=limits)


START_ROUTE = "start_search"


def start_url(endpoint: str) -> str:
    """The start_search URL an `--endpoint` means. A base URL with no path (`fanfuse serve`'s
    `http://127.0.0.1:8000`, a deployment's `https://REGION-PROJECT.cloudfunctions.net`, an API
    Gateway stage) gets `/start_search`: serve and API Gateway route it by that name, Cloud
    Functions name the function so, and a function of its own (Cloud Run, `fanfuse dev`) answers
    every path. Any other URL is taken as the start_search URL it is."""
    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("http", "https") or parts.path.strip("/"):
        return endpoint.strip()
    return urlunsplit(parts._replace(path=f"/{START_ROUTE}"))


STATUS_ROUTE = "search_status"


def status_url(endpoint: str, task_id: str) -> str:
    """The status URL of search `task_id` on the deployment an `--endpoint` names, for a search
    this client did not start (`fanfuse trace --endpoint`): `{search_status URL}/{task_id}`, the
    shape of every status_url the API gives. A base URL or a start_search URL has search_status
    beside start_search (serve, API Gateway and Cloud Functions route both by name); a
    search_status URL is taken as it is. A function of its own (Cloud Run, `fanfuse dev`)
    answers every path and reads the task id from the last segment, so its URL works bare."""
    parts = urlsplit(start_url(endpoint))
    path = parts.path.rstrip("/")
    head, _, last = path.rpartition("/")
    if last == START_ROUTE:
        path = f"{head}/{STATUS_ROUTE}"
    elif last != STATUS_ROUTE:
        path = f"{path}/{STATUS_ROUTE}"
    path = f"{path}/{quote(task_id, safe='')}"
    return urlunsplit(parts._replace(path=path, query="", fragment=""))


def _raise_for(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        body = ErrorBody.model_validate(response.json())
    except ValueError:
        body = ErrorBody(
            error="http_error", message=f"HTTP {response.status_code}: {response.text[:200]}"
        )
    raise ApiError(response.status_code, body)


def _parse(response: httpx.Response, model: type[M]) -> M:
    """A success answer as `model`; one that is not (a web page, another API) is Unavailable."""
    _raise_for(response)
    try:
        return model.model_validate(response.json())
    except ValueError:  # not JSON, or not this shape (ValidationError is a ValueError)
        raise Unavailable(
            f"{response.request.url} answered HTTP {response.status_code} but not with a "
            f"fanfuse {model.__name__} document; is it the start_search URL?"
        ) from None


def unreachable(url: str, exc: httpx.TransportError) -> Unreachable:
    """`cannot reach URL: connection refused`, `... timed out connecting`, and the like."""
    if isinstance(exc, httpx.ConnectTimeout):
        return Unreachable(f"cannot reach {url}: timed out connecting")
    if isinstance(exc, httpx.TimeoutException):
        return Unreachable(f"no answer from {url}: timed out")
    verb = "cannot reach" if isinstance(exc, httpx.ConnectError) else "no answer from"
    return Unreachable(f"{verb} {url}: {_reason(exc)}")


def _reason(exc: BaseException) -> str:
    """The operating system's reason under httpx's wrappers ("All connection attempts failed")."""
    cause: BaseException | None = exc
    for _ in range(10):  # a cause chain is short; a cycle must not hang us
        if cause is None:
            break
        if isinstance(cause, socket.gaierror):
            return cause.strerror or str(cause)
        if isinstance(cause, OSError) and cause.errno and cause.errno > 0:
            return os.strerror(cause.errno).lower()
        cause = cause.__cause__ or cause.__context__
    return str(exc) or type(exc).__name__


class HttpSearchClient:
    """Searches through a deployed (or `fanfuse dev`, or `fanfuse serve`) stack's `start_search`.

    `start`, `status` and `cancel` are the API's three calls, each one request; `search` starts
    and polls `status_url` until the search is terminal. `http`: a client to reuse across calls
    (its connection pool); else one per call. `auth`: the credential sent with every call
    (`fanfuse.auth.outbound`: an API key, a Google or Firebase ID token, a SigV4 signature;
    `ClientAuth(...).build(endpoint)` makes one); `api_key`: shorthand for an API key alone.
    Neither appears in `repr` or in any message.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        poll: float = 0.2,
        timeout: float = 30.0,
        http: httpx.AsyncClient | None = None,
        api_key: str | None = None,
        auth: httpx.Auth | None = None,
    ) -> None:
        self.endpoint = start_url(endpoint)
        self.poll = poll
        self.timeout = timeout
        self.http = http
        if auth is None and api_key:
            from fanfuse.auth.outbound import ApiKeyAuth

            auth = ApiKeyAuth(api_key)
        self._auth = auth

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[httpx.AsyncClient]:
        if self.http is not None:
            yield self.http
        else:
            async with api_http(self.timeout) as http:
                yield http

    async def _call(
        self, http: httpx.AsyncClient, method: str, url: str, model: type[M], **kw: Any
    ) -> M:
        try:
            auth = httpx.USE_CLIENT_DEFAULT if self._auth is None else self._auth
            response = await http.request(method, url, auth=auth, **kw)
        except httpx.TransportError as exc:
            raise unreachable(url, exc) from exc
        return _parse(response, model)

    async def start(self, payload: dict[str, Any]) -> Accepted:
        async with self._client() as http:
            return await self._call(http, "POST", self.endpoint, Accepted, json=payload)

    async def status(self, accepted: Accepted) -> TaskView:
        async with self._client() as http:
            return await self._call(http, "GET", accepted.status_url, TaskView)

    async def status_of(self, task_id: str) -> TaskView:
        """A search's status by its id alone (`status_url`), one this client may not have
        started: the API checks the caller may read it, as for any status call."""
        async with self._client() as http:
            return await self._call(http, "GET", status_url(self.endpoint, task_id), TaskView)

    async def cancel(self, accepted: Accepted) -> TaskView:
        """POST `cancel_url`; Unavailable when the stack named none (an older deployment)."""
        if accepted.cancel_url is None:
            raise Unavailable(f"{self.endpoint} gave no cancel_url for {accepted.task_id}")
        async with self._client() as http:
            return await self._call(http, "POST", accepted.cancel_url, TaskView)

    async def wait(
        self, accepted: Accepted, on_update: Callable[[TaskView], None] | None = None
    ) -> TaskView:
        async with self._client() as http:
            return await self._poll(http, accepted, on_update)

    async def search(
        self, payload: dict[str, Any], on_update: Callable[[TaskView], None] | None = None
    ) -> TaskView:
        async with self._client() as http:
            accepted = await self._call(http, "POST", self.endpoint, Accepted, json=payload)
            return await self._poll(http, accepted, on_update)

    async def _poll(
        self,
        http: httpx.AsyncClient,
        accepted: Accepted,
        on_update: Callable[[TaskView], None] | None,
    ) -> TaskView:
        async def fetch() -> TaskView:
            return await self._call(http, "GET", accepted.status_url, TaskView)

        return await until_terminal(fetch, interval=self.poll, on_update=on_update)
