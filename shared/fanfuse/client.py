"""A client of the HTTP API: start a search, then poll its status_url until it is terminal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from fanfuse.errors import ApiError
from fanfuse.models import Accepted, ErrorBody, TaskView
from fanfuse.polling import until_terminal


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


class HttpSearchClient:
    """Searches through a deployed (or `fanfuse dev`) stack's `start_search` endpoint.

    `http`: a client to reuse across searches (its connection pool); else one per search.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        poll: float = 0.2,
        timeout: float = 30.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.poll = poll
        self.timeout = timeout
        self.http = http

    async def search(
        self, payload: dict[str, Any], on_update: Callable[[TaskView], None] | None = None
    ) -> TaskView:
        if self.http is not None:
            return await self._search(self.http, payload, on_update)
        async with httpx.AsyncClient(timeout=self.timeout) as http:
            return await self._search(http, payload, on_update)

    async def _search(
        self,
        http: httpx.AsyncClient,
        payload: dict[str, Any],
        on_update: Callable[[TaskView], None] | None,
    ) -> TaskView:
        response = await http.post(self.endpoint, json=payload)
        _raise_for(response)
        accepted = Accepted.model_validate(response.json())

        async def fetch() -> TaskView:
            answer = await http.get(accepted.status_url)
            _raise_for(answer)
            return TaskView.model_validate(answer.json())

        return await until_terminal(fetch, interval=self.poll, on_update=on_update)
