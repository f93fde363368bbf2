"""`HttpPlatform`: a platform that is one HTTP API, as a pure request builder and a pure parser.

Adapters only translate: `build_request` turns queries, parameters and a page token into a
`RequestSpec`; `check_response` turns an error answer into a clear `ProviderError`;
`parse_response` turns a body into hits and the next page's token. The shared runner does the
I/O, so adapters can be tested on fixtures without a network, and every provider gets the same
timeouts, retries, limits and call records. Searching pages until `params.limit` results are in
(or the provider has no more), once per query unless the provider takes several queries per call.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import SecretStr

from fanfuse.models import Hit
from fanfuse.platforms.base import (
    Platform,
    PlatformContext,
    PlatformSettings,
    ProviderError,
    SearchParams,
)
from fanfuse.platforms.runner import RequestSpec, Response, Runner, default_runner, policy_of

PageToken = int | str | None


class HttpSettings(PlatformSettings):
    """Settings every HTTP platform shares (env: `FANFUSE_<NAME>_<FIELD>`)."""

    base_url: str
    max_attempts: int = 3
    max_retry_after: float = 30.0
    min_interval: float = 0.0
    max_pages: int = 5
    max_body_bytes: int = 5_000_000


@dataclass
class Page:
    """One parsed answer: hits (`query_index` relative to the request's queries) and the token
    of the next page, None when there is none."""

    hits: list[Hit]
    next_page: PageToken = None
    info: dict[str, Any] = field(default_factory=dict)


def secret(value: SecretStr | None) -> str:
    return value.get_secret_value() if value is not None else ""


def load_json(platform: str, body: bytes) -> Any:
    """The body as JSON, or a `ProviderError` that says the provider sent something else."""
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        start = body[:80].decode("utf-8", errors="replace").strip()
        raise ProviderError(
            platform, f"malformed response: expected JSON, got {start!r}... ({exc})"
        ) from exc


def require(platform: str, value: Any, kind: type, where: str) -> Any:
    """`value` if it is a `kind`, else a `ProviderError` naming the field that was wrong."""
    if not isinstance(value, kind):
        raise ProviderError(
            platform,
            f"malformed response: {where} should be {kind.__name__}, got {type(value).__name__}",
        )
    return value


def json_items(platform: str, data: Mapping[str, Any], *path: str) -> list[dict[str, Any]]:
    """The result items at `path` in a decoded body that carry a string `url`, in order.

    Each step of `path` must be an object and the last a list (a missing one counts as empty);
    anything else is a `ProviderError` naming the dotted path. Items that are not objects or
    have no string `url` are skipped.
    """
    value: Any = data
    for depth, key in enumerate(path, 1):
        last = depth == len(path)
        where = "`" + ".".join(path[:depth]) + "`"
        value = require(platform, value.get(key, [] if last else {}), list if last else dict, where)
    return [item for item in value if isinstance(item, dict) and isinstance(item.get("url"), str)]


def error_detail(body: bytes, limit: int = 200) -> str:
    """A short human-readable reason from an error body (JSON `message`/`error` or text)."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        text = " ".join(body[:1000].decode("utf-8", errors="replace").split())
        return text[:limit]
    found = _find_message(data)
    return (found or json.dumps(data)[:limit])[:limit]


def _find_message(data: Any) -> str | None:
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        for key in ("message", "detail", "error", "errors", "error_message", "msg"):
            if key in data:
                found = _find_message(data[key])
                if found:
                    return found
    if isinstance(data, list) and data:
        return _find_message(data[0])
    return None


class HttpPlatform(Platform):
    """Base of the platforms that are an HTTP search API (see the module docstring)."""

    settings_model: ClassVar[type[PlatformSettings]] = HttpSettings
    uses_strategy: ClassVar[bool] = False
    """Shape queries for their language and top up short result lists (content/strategy.py)."""
    key_fields: ClassVar[tuple[str, ...]] = ()
    """Settings that hold credentials: named in the message of a 401/403."""

    @abstractmethod
    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: Any
    ) -> RequestSpec:
        """The request for `queries` (one, unless `multi_query`) at `page` (None: the first)."""

    @abstractmethod
    def parse_response(
        self, status: int, headers: Mapping[str, str], body: bytes, queries: list[str],
        page: PageToken, settings: Any,
    ) -> Page:  # fmt: skip
        """Hits and the next page's token from a successful answer to the request for `page`."""

    def settings_for(self, params: SearchParams, settings: Any) -> Any:
        """The settings one search uses (e.g. with its language); both pure functions see it."""
        return settings

    def check_response(
        self, status: int, headers: Mapping[str, str], body: bytes, settings: Any
    ) -> None:
        """Raise a clear `ProviderError` for an answer that is not a result page."""
        if 200 <= status < 300:
            return
        detail = error_detail(body)
        suffix = f": {detail}" if detail else ""
        if status in (401, 403):
            keys = ", ".join(self.settings_env_name(k) for k in self.key_fields)
            hint = f" (check {keys})" if keys else ""
            raise ProviderError(self.name, f"HTTP {status}: credentials rejected{hint}{suffix}")
        raise ProviderError(self.name, f"HTTP {status}{suffix}")

    # -- I/O, shared by all HTTP platforms ---------------------------------------------------

    async def fetch(self, ctx: PlatformContext, spec: RequestSpec, settings: Any) -> Response:
        runner: Runner = ctx.runner or default_runner()
        calls: list[dict[str, Any]] = ctx.extras.setdefault("calls", [])
        response = await runner.request(self.name, spec, policy_of(settings), calls)
        if response.truncated:
            raise ProviderError(
                self.name,
                f"malformed response: body larger than {settings.max_body_bytes} bytes",
            )
        return response

    async def _page(
        self, ctx: PlatformContext, queries: list[str], params: SearchParams, page: PageToken
    ) -> Page:
        settings = self.settings_for(params, ctx.settings)
        spec = self.build_request(queries, params, page, settings)
        response = await self.fetch(ctx, spec, settings)
        self.check_response(response.status, response.headers, response.body, settings)
        return self.parse_response(
            response.status, response.headers, response.body, queries, page, settings
        )

    async def _collect(
        self, ctx: PlatformContext, queries: list[str], params: SearchParams
    ) -> list[list[Hit]]:
        """Page through results for `queries` until each has `params.limit` hits or no more."""
        lists: list[list[Hit]] = [[] for _ in queries]
        seen: list[set[str]] = [set() for _ in queries]
        max_pages = int(getattr(ctx.settings, "max_pages", 1))
        page: PageToken = None
        for _ in range(max(max_pages, 1)):
            result = await self._page(ctx, queries, params, page)
            self.collect_info(ctx, result)
            added = 0
            for hit in result.hits:
                if hit.content is not None and not params.include_content:
                    hit = hit.model_copy(update={"content": None})  # keep documents small
                qi = hit.query_index if 0 <= hit.query_index < len(queries) else 0
                if hit.url in seen[qi] or len(lists[qi]) >= params.limit:
                    continue
                seen[qi].add(hit.url)
                lists[qi].append(hit)
                added += 1
            if added == 0 or result.next_page is None:
                break
            if all(len(items) >= params.limit for items in lists):
                break
            page = result.next_page
        return lists

    async def _with_strategy(
        self, ctx: PlatformContext, query: str, params: SearchParams
    ) -> list[Hit]:
        """One query's hits; with `uses_strategy`, shaped and topped up by broader queries."""
        if not self.uses_strategy:
            return (await self._collect(ctx, [query], params))[0]
        from fanfuse.content.strategy import shape_query, supplemental_queries

        shaped = shape_query(query, params.language)
        found = (await self._collect(ctx, [shaped], params))[0]
        seen = {h.url for h in found}
        for extra in supplemental_queries(shaped):
            if len(found) >= params.limit:
                break
            for hit in (await self._collect(ctx, [extra], params))[0]:
                if hit.url not in seen and len(found) < params.limit:
                    seen.add(hit.url)
                    meta = {**hit.metadata, "supplemental_query": extra}
                    found.append(hit.model_copy(update={"metadata": meta}))
        return found

    def collect_info(self, ctx: PlatformContext, page: Page) -> None:
        """Keep what a page says besides hits (answers, suggestions) for the run's record."""
        if page.info:
            ctx.extras.setdefault("page_info", []).append(page.info)

    async def search(self, ctx: PlatformContext, params: SearchParams) -> list[list[Hit]]:
        queries = params.queries
        if self.capabilities.multi_query:
            return await self._collect(ctx, queries, params)
        done = 0

        async def one(query: str) -> list[Hit]:
            nonlocal done
            found = await self._with_strategy(ctx, query, params)
            done += 1
            ctx.report(done, len(queries), f"{done}/{len(queries)} queries")
            return found

        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(one(q)) for q in queries]
        except BaseExceptionGroup as group_error:
            raise unwrap_group_error(group_error) from None
        return [task.result() for task in tasks]


def unwrap_group_error(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def as_float(value: Any) -> float | None:
    try:
        return float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def parse_date(value: Any) -> datetime | None:
    """A provider's date (ISO 8601, `YYYY-MM-DD` or an RFC 2822 date) as an aware datetime."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def strip_html(fragment: Any) -> str:
    """Text of an HTML fragment (search highlights like `<strong>` or `<span class=...>`)."""
    text = as_str(fragment)
    if "<" not in text and "&" not in text:
        return text.strip()
    from selectolax.lexbor import LexborHTMLParser

    node = LexborHTMLParser(f"<div>{text}</div>").css_first("div")
    plain = node.text(separator="") if node is not None else text
    return " ".join(plain.split())


def bearer(key: SecretStr | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret(key)}"}
