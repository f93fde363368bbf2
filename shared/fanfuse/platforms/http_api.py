"""`HttpPlatform`: a platform that is one HTTP API, as a pure request builder and a pure parser.

Adapters only translate: `build_request` turns queries, parameters and a page token into a
`RequestSpec`; `check_response` turns an error answer into a clear `ProviderError`;
`parse_response` turns one `ProviderResponse` (the answer with what was asked, as SearXNG's
`response(resp)` gets it) into hits and the next page's token. The shared runner (`fanfuse.net`)
does the I/O, so adapters can be tested on fixtures without a network, and every provider gets
the same timeouts, retries, limits and call records. Searching pages until `params.limit`
results are in (or the provider has no more), once per query unless the provider takes several
queries per call.

`base_url` means one thing for every HTTP platform: the API root, to which the adapter appends
its `endpoint` path (`https://www.googleapis.com` + `/customsearch/v1`), so a proxy or a mirror
is set the same way everywhere. The older spelling with the endpoint (or the leading part of it)
already in `base_url` is still accepted: see `endpoint_url`.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar
from urllib.parse import urlsplit

from fanfuse.net.policy import PROVIDER, CallPolicy
from fanfuse.net.runner import RequestSpec, Response
from fanfuse.platforms.contract import Platform, PlatformContext, PlatformSettings, SearchParams
from fanfuse.platforms.parsing import error_detail
from fanfuse.platforms.pricing import results_charge
from fanfuse.platforms.strategy import MAX_SUPPLEMENTS, shape_query, supplemental_queries
from fanfuse.wire.errors import ProviderError, kind_for_status, unwrap_group_error
from fanfuse.wire.models import FailureKind, Hit

PageToken = int | str | None


class HttpSettings(PlatformSettings):
    """Settings every HTTP platform shares (env: `FANFUSE_<NAME>_<FIELD>`)."""

    base_url: str
    """The API root; the platform appends its endpoint path (see the module docstring)."""
    max_attempts: int = PROVIDER.max_attempts
    """Attempts per provider call on a timeout, a 429 or a 5xx (never on another 4xx)."""
    max_retry_after: float = PROVIDER.max_retry_after
    """The longest `Retry-After` honoured before a retry, in seconds; longer: the run fails as rate
    limited."""
    min_interval: float = PROVIDER.min_interval
    """Seconds between two calls' starts per process (0: none)."""
    max_pages: int = 5
    """Result pages asked per query at most, when a provider pages."""
    max_body_bytes: int = PROVIDER.max_body_bytes
    """A provider answer is read up to this many bytes."""

    def call_policy(self) -> CallPolicy:
        return CallPolicy(
            timeout=self.timeout,
            max_concurrency=self.max_concurrency,
            max_attempts=self.max_attempts,
            max_retry_after=self.max_retry_after,
            min_interval=self.min_interval,
            max_body_bytes=self.max_body_bytes,
        )


H = TypeVar("H", bound=HttpSettings)


@dataclass(frozen=True)
class ProviderResponse(Generic[H]):
    """One answer of the provider, with the request it answers (queries, page, settings)."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    queries: list[str]
    page: PageToken
    params: SearchParams
    settings: H


@dataclass
class Page:
    """One parsed answer: hits (`query_index` relative to the request's queries) and the token
    of the next page, None when there is none."""

    hits: list[Hit]
    next_page: PageToken = None


def endpoint_url(base_url: str, path: str) -> str:
    """`base_url` with the endpoint `path` appended, unless it already ends with part of it.

    Segments at the end of `base_url`'s path that equal the leading segments of `path` are not
    repeated: `http://proxy/v1` + `/v1/search` is `http://proxy/v1/search`, and a full endpoint
    (`.../customsearch/v1`, the older spelling) stays as it is. The one ambiguity: an API root
    whose own path ends like the endpoint starts (a SearXNG instance served under `/search`)
    is read as the full endpoint; give such a root with a trailing segment that differs.
    """
    base = base_url.rstrip("/")
    wanted = [s for s in path.split("/") if s]
    have = [s for s in urlsplit(base).path.split("/") if s]
    for overlap in range(min(len(wanted), len(have)), 0, -1):
        if have[-overlap:] == wanted[:overlap]:
            wanted = wanted[overlap:]
            break
    return "/".join([base, *wanted])


class HttpPlatform(Platform[H]):
    """Base of the platforms that are an HTTP search API (see the module docstring)."""

    endpoint: ClassVar[str] = ""
    """The path appended to `base_url` (the API root)."""
    uses_strategy: ClassVar[bool] = False
    """Shape queries for their language and top up short result lists (strategy.py)."""
    key_fields: ClassVar[tuple[str, ...]] = ()
    """Settings that hold credentials: named in the message of a 401/403."""
    page_size: ClassVar[int | None] = None
    """Results one page holds when the platform pages (a request per page, up to `max_pages`);
    None: one request per query answers the whole depth (pricing.py's plan)."""
    max_per_request: ClassVar[int | None] = None
    """The most results one request returns (the provider's cap), when it matters for a price
    per result; None: the depth."""

    def planned_calls(self, queries: int, depth: int, settings: H | None) -> tuple[int, int]:
        """Requests per query: the pages the depth needs, at most `max_pages` (the settings', or
        the settings class's default when this process cannot read them), times the supplemental
        queries a strategy may add; one request for all queries on a multi-query platform."""
        per_request = min(depth, self.page_size or depth, self.max_per_request or depth)
        pages = 1
        if self.page_size:
            most = settings.max_pages if settings is not None else self._default_max_pages()
            pages = max(1, min(most, -(-depth // self.page_size)))
        if self.capabilities.multi_query:
            return pages, per_request
        tries = 1 + (MAX_SUPPLEMENTS if self.uses_strategy else 0)
        return queries * pages * tries, per_request

    def _default_max_pages(self) -> int:
        default = self.settings_model.model_fields["max_pages"].default
        return int(default) if isinstance(default, int) else 1

    def url(self, settings: H) -> str:
        return endpoint_url(settings.base_url, self.endpoint)

    @abstractmethod
    def build_request(
        self, queries: list[str], params: SearchParams, page: PageToken, settings: H
    ) -> RequestSpec:
        """The request for `queries` (one, unless `multi_query`) at `page` (None: the first)."""

    @abstractmethod
    def parse_response(self, resp: ProviderResponse[H]) -> Page:
        """Hits and the next page's token from a successful answer."""

    def settings_for(self, params: SearchParams, settings: H) -> H:
        """The settings one search uses (e.g. with its language); both pure functions see it."""
        return settings

    def check_response(self, resp: ProviderResponse[H]) -> None:
        """Raise a clear `ProviderError` for an answer that is not a result page."""
        if 200 <= resp.status < 300:
            return
        detail = error_detail(resp.body)
        suffix = f": {detail}" if detail else ""
        if resp.status in (401, 403):
            keys = ", ".join(self.settings_env_name(k) for k in self.key_fields)
            hint = f" (check {keys})" if keys else ""
            raise ProviderError(
                self.name,
                f"HTTP {resp.status}: credentials rejected{hint}{suffix}",
                FailureKind.DENIED,
            )
        raise ProviderError(self.name, f"HTTP {resp.status}{suffix}", kind_for_status(resp.status))

    # -- I/O, shared by all HTTP platforms ---------------------------------------------------

    async def fetch(self, ctx: PlatformContext[H], spec: RequestSpec, settings: H) -> Response:
        policy = settings.call_policy()
        response = await ctx.runner.request(
            self.name,
            spec,
            policy,
            ctx.record.calls,
            price_usd=ctx.price.per_request_usd,
            pace=ctx.pace,
            hold=ctx.hold,
        )
        if response.truncated:
            raise ProviderError(
                self.name,
                f"malformed response: body larger than {policy.max_body_bytes} bytes",
            )
        return response

    async def _page(
        self, ctx: PlatformContext[H], queries: list[str], params: SearchParams, page: PageToken
    ) -> Page:
        settings = self.settings_for(params, ctx.settings)
        spec = self.build_request(queries, params, page, settings)
        response = await self.fetch(ctx, spec, settings)
        resp = ProviderResponse(
            status=response.status,
            headers=response.headers,
            body=response.body,
            queries=queries,
            page=page,
            params=params,
            settings=settings,
        )
        try:
            self.check_response(resp)
        except ProviderError as exc:  # an adapter's own check: whose failure, by the status
            exc.kind = exc.kind or kind_for_status(resp.status)
            raise
        page_ = self.parse_response(resp)
        extra = results_charge(ctx.price, page_.hits, params.include_content)
        if extra and response.record is not None and response.record.cost_usd:
            response.record.cost_usd = round(response.record.cost_usd + extra, 6)
        return page_

    def _may_call(self, ctx: PlatformContext[H], first: bool) -> bool:
        """Whether the run's shares of the search's provider calls and of its money (limits.py,
        pricing.py) allow one more request: both are taken, or neither. A query's first page
        refused is that query's failure (not asked), a later one ends its paging with the pages
        it has."""
        budgets = [b for b in (ctx.cost_budget, ctx.call_budget) if b is not None]
        spent = next((b for b in budgets if b.used >= b.cap), None)
        if spent is None:
            for budget in budgets:
                budget.take()
            return True
        spent.take()  # counted as skipped
        if first:
            what = "money" if spent is ctx.cost_budget else "calls"
            message = (
                f"not asked: this platform's share of the search's {what} ({spent.cap} "
                f"call{'s' if spent.cap != 1 else ''}) is spent"
            )
            raise ProviderError(self.name, message, FailureKind.NOT_ASKED)
        return False

    async def _collect(
        self, ctx: PlatformContext[H], queries: list[str], params: SearchParams
    ) -> list[list[Hit]]:
        """Page through results for `queries` until each has `params.limit` hits or no more."""
        lists: list[list[Hit]] = [[] for _ in queries]
        seen: list[set[str]] = [set() for _ in queries]
        page: PageToken = None
        for n in range(max(ctx.settings.max_pages, 1)):
            if not self._may_call(ctx, first=n == 0):
                break
            result = await self._page(ctx, queries, params, page)
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
        self, ctx: PlatformContext[H], query: str, params: SearchParams
    ) -> list[Hit]:
        """One query's hits; with `uses_strategy`, shaped and topped up by broader queries."""
        if not self.uses_strategy:
            return (await self._collect(ctx, [query], params))[0]
        shaped = shape_query(query, params.language)
        found = (await self._collect(ctx, [shaped], params))[0]
        seen = {h.url for h in found}
        for extra in supplemental_queries(shaped):
            if len(found) >= params.limit:
                break
            try:
                more = (await self._collect(ctx, [extra], params))[0]
            except ProviderError as exc:
                if exc.kind is FailureKind.NOT_ASKED:  # the call cap: keep what was found
                    break
                raise
            for hit in more:
                if hit.url not in seen and len(found) < params.limit:
                    seen.add(hit.url)
                    meta = {**hit.metadata, "supplemental_query": extra}
                    found.append(hit.model_copy(update={"metadata": meta}))
        return found

    async def search(self, ctx: PlatformContext[H], params: SearchParams) -> list[list[Hit]]:
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
