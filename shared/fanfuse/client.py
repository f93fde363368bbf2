"""A client of the HTTP API: start a search, then poll its status_url until it is terminal."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from fanfuse.errors import FanfuseError
from fanfuse.models import Accepted, ErrorBody, TaskView


class ApiError(FanfuseError):
    def __init__(self, status: int, body: ErrorBody) -> None:
        self.status_code = status
        self.error = body
        super().__init__(body.message)


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
    def __init__(self, endpoint: str, *, poll: float = 0.2, timeout: float = 30.0) -> None:
        self.endpoint = endpoint
        self.poll = poll
        self.timeout = timeout

    async def search(
        self, payload: dict[str, Any], on_update: Callable[[TaskView], None] | None = None
    ) -> TaskView:
        async with httpx.AsyncClient(timeout=self.timeout) as http:
            response = await http.post(self.endpoint, json=payload)
            _raise_for(response)
            accepted = Accepted.model_validate(response.json())
            while True:
                response = await http.get(accepted.status_url)
                _raise_for(response)
                view = TaskView.model_validate(response.json())
                if on_update:
                    on_update(view)
                if view.status.terminal:
                    return view
                await asyncio.sleep(self.poll)
