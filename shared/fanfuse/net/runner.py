"""The shared HTTP runner: every platform's and stage's I/O goes through one place.

Why one place: connection reuse (one `httpx.AsyncClient` per event loop, which is one per process
when the process keeps its loop; a Cloud Function that calls `asyncio.run` per request gets a
fresh client on the new loop instead of a pool whose sockets belong to a closed loop), one
concurrency limit and request spacing per platform, and the retry policy of the design applied
the same way to every provider:

- retried: HTTP 429 and 5xx, timeouts, connection errors; never other 4xx;
- waits: 0.5 s x 2^(n-1) plus up to 50 % jitter, or the server's `Retry-After` (seconds or an
  HTTP date) capped at `max_retry_after`;
- at most `max_attempts` attempts, then a `ProviderError` that says what kept failing.

Bodies are read raw and decoded here (`codings.BoundedBody`): the cap of `max_body_bytes` holds
for the decoded bytes as they are produced, whatever the content coding, and a body with a
coding that cannot be read (stacked, unknown, corrupt) is an `UndecodableBody`, never retried.
Redirects are followed here too, their bodies unread. Text comes from the WHATWG charset labels
only (`charsets`).

Every call is recorded (method, URL without secrets, status, attempts, seconds) so the platform
document shows where time went; a priced call is also counted before it is sent (`holds.CallHold`,
the spend ledger of rules/spend.py), and its record says what it cost. The credentials a request
carries are handed to `fanfuse.support.redact` before it is sent, so no record, error or log line
made afterwards (an error body that echoes the key included) shows them; httpx's own log line,
which names the URL, is masked too. Waits go through an injectable `sleep`, so tests never sleep.
The defaults of every limit are in `policy.py`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import httpx
from pydantic import JsonValue
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from fanfuse.net import charsets
from fanfuse.net.codings import ACCEPT_ENCODING, BoundedBody, Undecodable
from fanfuse.net.holds import CallHold, Departure
from fanfuse.net.policy import USER_AGENT, CallPolicy
from fanfuse.support.redact import SecretFilter, credentials, redact, redact_url, remember
from fanfuse.support.retry_after import parse_retry_after
from fanfuse.tracing import http, spans
from fanfuse.wire.errors import Cancelled, ProviderError, kind_for_status
from fanfuse.wire.models import CallRecord

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504}) | frozenset(range(505, 600))
BACKOFF_BASE = 0.5
MAX_RECORDED_CALLS = 200

if not any(isinstance(f, SecretFilter) for f in logging.getLogger("httpx").filters):
    logging.getLogger("httpx").addFilter(SecretFilter())  # it logs every request's URL at INFO

SleepFn = Callable[[float], Awaitable[None]]
PaceFn = Callable[[], Awaitable[float]]
"""Waits for the provider's pace across workers; returns the seconds it waited (pacing.py)."""
Params = Mapping[str, str | int | float] | Sequence[tuple[str, str | int | float]]


@dataclass(frozen=True)
class RequestSpec:
    """One HTTP request, built by a pure function; the runner sends it."""

    url: str
    method: str = "GET"
    params: Params = ()
    """Query parameters; when given they replace any query string in `url`."""
    headers: Mapping[str, str] = field(default_factory=dict)
    json: JsonValue = None
    data: Mapping[str, str] | None = None
    follow_redirects: bool = True
    secret_params: frozenset[str] = frozenset()
    """Query parameters (API keys) replaced by `***` in call records."""
    extensions: Mapping[str, object] = field(default_factory=dict)
    """httpcore request extensions: `sni_hostname` for a connection pinned to an address."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str
    attempts: int
    elapsed: float
    truncated: bool = False
    """The body was longer than the cap and was cut there."""
    rejected_type: bool = False
    """The content type was not among the accepted ones; the body was not read."""
    record: CallRecord | None = None
    """The call's record (also in the run's list, when it had room): a platform adds what the
    answer itself costs (results past those a request's price includes)."""

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    def text(self) -> str:
        """The body as text: a WHATWG charset label of the header (or a BOM), else UTF-8 with
        replacement characters; never a Python codec a page names (`charsets`). Linear in the
        body, but a page of megabytes is worth `asyncio.to_thread`."""
        return charsets.text_of(self.body, self.headers.get("content-type", ""))


def backoff(attempt: int, rng: random.Random) -> float:
    """0.5 s x 2^(attempt-1), plus up to half of that again as jitter (spreads retries out)."""
    base = BACKOFF_BASE * 2.0 ** (attempt - 1)
    return base + rng.uniform(0, base / 2)


class UndecodableBody(ProviderError):
    """An answer whose body cannot be read: stacked, unknown or corrupt content coding
    (`codings.Undecodable`). Not retried: the same server sends the same bytes again."""


class _Retryable(Exception):
    """One failed attempt worth another: a 429/5xx answer, a timeout, a connection error."""

    def __init__(
        self,
        reason: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        timeout: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason, self.status, self.retry_after, self.timeout = (
            reason,
            status,
            retry_after,
            timeout,
        )


@dataclass
class _LoopState:
    """What must not outlive its event loop: the client, semaphores, spacing locks."""

    client: httpx.AsyncClient | None = None
    semaphores: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    spacing: dict[str, asyncio.Lock] = field(default_factory=dict)
    last_call: dict[str, float] = field(default_factory=dict)


class Runner:
    """Sends `RequestSpec`s for platforms, with limits, retries and call records."""

    def __init__(
        self,
        *,
        sleep: SleepFn = asyncio.sleep,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.AsyncBaseTransport | None = None,
        user_agent: str = USER_AGENT,
    ) -> None:
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.clock = clock
        self.transport = transport
        self.user_agent = user_agent
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )

    # -- per-loop state -----------------------------------------------------------------------

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            state = self._loops[loop] = _LoopState()
        return state

    def client(self) -> httpx.AsyncClient:
        """The client of the running loop, created on first use."""
        state = self._state()
        if state.client is None or state.client.is_closed:
            state.client = httpx.AsyncClient(
                transport=self.transport,
                follow_redirects=False,
                headers={"User-Agent": self.user_agent, "Accept-Encoding": ACCEPT_ENCODING},
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
            )
        return state.client

    async def aclose(self) -> None:
        """Close the running loop's client (tests, graceful shutdown)."""
        state = self._loops.get(asyncio.get_running_loop())
        if state is not None and state.client is not None:
            await state.client.aclose()
            state.client = None

    def _semaphore(self, state: _LoopState, platform: str, limit: int) -> asyncio.Semaphore:
        sem = state.semaphores.get(platform)
        if sem is None:
            sem = state.semaphores[platform] = asyncio.Semaphore(max(limit, 1))
        return sem

    async def _space(self, state: _LoopState, platform: str, interval: float) -> None:
        """Keep at least `interval` seconds between the starts of a platform's requests."""
        if interval <= 0:
            return
        lock = state.spacing.setdefault(platform, asyncio.Lock())
        async with lock:
            last = state.last_call.get(platform)
            if last is not None:
                wait = last + interval - self.clock()
                if wait > 0:
                    await self.sleep(wait)
            state.last_call[platform] = self.clock()

    # -- requests -----------------------------------------------------------------------------

    async def request(
        self,
        platform: str,
        spec: RequestSpec,
        policy: CallPolicy,
        calls: list[CallRecord] | None = None,
        *,
        accept_types: Sequence[str] | None = None,
        price_usd: float = 0.0,
        pace: PaceFn | None = None,
        hold: CallHold | None = None,
    ) -> Response:
        """`_request` in an HTTP client span (tracing on): one span per call, its retries as
        events, its attributes the semantic conventions' with the URL's secrets masked
        (`fanfuse.tracing.http`)."""
        url = redact_url(spec.url, spec.secret_params)
        with spans.span(spec.method, http.target(platform, url), kind="client"):
            return await self._request(
                platform,
                spec,
                policy,
                calls,
                accept_types=accept_types,
                price_usd=price_usd,
                pace=pace,
                hold=hold,
            )

    async def _request(
        self,
        platform: str,
        spec: RequestSpec,
        policy: CallPolicy,
        calls: list[CallRecord] | None = None,
        *,
        accept_types: Sequence[str] | None = None,
        price_usd: float = 0.0,
        pace: PaceFn | None = None,
        hold: CallHold | None = None,
    ) -> Response:
        """Send `spec` with retries; return the final answer unless it is a retryable failure.

        `price_usd`: what the provider charges for this call (the platform's price list); the
        record carries it when the provider answered with a 2xx, which is what the providers'
        price lists bill (a refused or failed call is not charged, whatever its attempts).
        `hold`: counts the call before its first attempt is sent (`holds.CallHold`); a call it
        held that got no answer (cut by a timeout, a cancel, the deadline) but whose request
        may have left may still be billed, so its record carries the held price.

        A 4xx other than 429 is returned (the platform decides what it means); a 429/5xx, a
        timeout or a connection error that outlasts `max_attempts` raises `ProviderError`.

        `pace`: awaited before each attempt (the provider's pace across the deployment's
        workers); its waits are on the record (`paced_s`). A call cancelled once an attempt
        started (a hedged chain member that lost: service/chains.py) is recorded as such and
        charged as a held call that got no answer (its held price if its request may have
        left), or, with no hold, `price_usd`: the provider may have answered it, and the
        receipt errs on the side of what may have been billed.
        """
        state = self._state()
        started = self.clock()
        attempts = 0
        query = _params(spec.params)
        full = httpx.URL(spec.url, params=query) if query else httpx.URL(spec.url)
        body = spec.json if isinstance(spec.json, dict) else spec.data or {}
        remember(*credentials(spec.url, spec.headers, [*query, *body.items()], spec.secret_params))
        shown_url = redact_url(str(full), spec.secret_params)
        record = CallRecord(platform=platform, method=spec.method, url=shown_url)
        held_usd = 0.0
        departure = Departure(
            tracing=self.transport is None or isinstance(self.transport, httpx.AsyncHTTPTransport)
        )
        if hold is not None:
            spec = replace(spec, extensions={**spec.extensions, "trace": departure.trace})

        def before_send() -> None:
            nonlocal held_usd
            if hold is not None and record.hold is None:
                record.hold, held_usd = hold()

        def wait(retry_state: RetryCallState) -> float:
            exc = retry_state.outcome.exception() if retry_state.outcome else None
            if isinstance(exc, _Retryable) and exc.retry_after is not None:
                seconds = min(exc.retry_after, policy.max_retry_after)
            else:
                seconds = backoff(retry_state.attempt_number, self.rng)
            spans.event("retry", http.retry(retry_state.attempt_number, exc, seconds))
            return seconds

        retrying = AsyncRetrying(
            stop=stop_after_attempt(max(policy.max_attempts, 1)),
            wait=wait,
            retry=retry_if_exception_type(_Retryable),
            sleep=self.sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if pace is not None:
                        record.paced_s = round(record.paced_s + await pace(), 4)
                    attempts += 1
                    response = await self._once(
                        state, platform, spec, policy, accept_types, before_send
                    )
                    record.status = response.status
                    if response.status in RETRY_STATUSES:
                        raise _Retryable(
                            f"HTTP {response.status}{_excerpt(response.body)}",
                            status=response.status,
                            retry_after=parse_retry_after(response.headers.get("retry-after")),
                        )
        except Cancelled as exc:  # the hold refused it: the run is no longer this worker's
            record.error = f"not sent: {exc}"
            raise
        except asyncio.CancelledError:  # a hedged member that lost, a cancel in this process
            record.error = "cancelled before the answer" if attempts else "cancelled unsent"
            if attempts and price_usd and hold is None:
                record.cost_usd = price_usd  # no hold to judge by: what may have been billed
            raise
        except Undecodable as exc:
            record.status, record.error = exc.status, str(exc)
            raise UndecodableBody(platform, f"{exc} (from {shown_url})") from exc
        except _Retryable as exc:
            record.status, record.error = exc.status, exc.reason
            what = (
                f"timed out after {policy.timeout:g}s"
                if exc.timeout
                else exc.reason
                if exc.status is not None
                else f"connection failed ({exc.reason})"
            )
            raise ProviderError(
                platform,
                f"{what}; gave up after {attempts} attempt(s) on {shown_url}",
                kind_for_status(exc.status),  # 429: rate limited; 5xx, no answer: an error
            ) from exc
        finally:
            elapsed = round(self.clock() - started, 4)
            record.attempts, record.seconds = attempts, elapsed
            if price_usd and record.status is not None and 200 <= record.status < 300:
                record.cost_usd = price_usd
            elif record.hold is not None and record.status is None and departure.may_have_left:
                record.cost_usd = held_usd  # sent, never answered: the provider may bill it
            if calls is not None and len(calls) < MAX_RECORDED_CALLS:
                calls.append(record)
            spans.annotate(http.call(record, shown_url))
        spans.annotate({"http.response.body.size": len(response.body)})
        return Response(
            status=response.status,
            headers=response.headers,
            body=response.body,
            url=response.url,
            attempts=attempts,
            elapsed=elapsed,
            truncated=response.truncated,
            rejected_type=response.rejected_type,
            record=record,
        )

    async def _once(
        self,
        state: _LoopState,
        platform: str,
        spec: RequestSpec,
        policy: CallPolicy,
        accept_types: Sequence[str] | None,
        before_send: Callable[[], None] | None = None,
    ) -> Response:
        await self._space(state, platform, policy.min_interval)
        async with self._semaphore(state, platform, policy.max_concurrency):
            if before_send is not None:
                before_send()  # nothing awaited between it and the send
            started = self.clock()
            try:
                return await self._send(spec, policy, accept_types, started)
            except httpx.TimeoutException as exc:
                raise _Retryable(type(exc).__name__, timeout=True) from exc
            except httpx.TransportError as exc:
                raise _Retryable(
                    redact(f"{type(exc).__name__}: {exc}") if str(exc) else type(exc).__name__
                ) from exc

    async def _send(
        self,
        spec: RequestSpec,
        policy: CallPolicy,
        accept_types: Sequence[str] | None,
        started: float,
    ) -> Response:
        client = self.client()
        request = client.build_request(
            spec.method,
            spec.url,
            params=_params(spec.params) or None,
            headers=dict(spec.headers),
            json=spec.json,
            data=dict(spec.data) if spec.data is not None else None,
            timeout=httpx.Timeout(policy.timeout),
            extensions=dict(spec.extensions),
        )
        # The whole exchange, body included, must fit the timeout (a slow drip is a timeout too).
        try:
            async with asyncio.timeout(policy.timeout):
                raw = await self._follow(client, request, spec.follow_redirects)
                try:
                    kind = raw.headers.get("content-type", "").split(";")[0].strip().lower()
                    if accept_types is not None and not any(
                        kind.startswith(t) for t in accept_types
                    ):
                        return Response(
                            raw.status_code, raw.headers, b"", str(raw.url), 1,
                            self.clock() - started, rejected_type=True,
                        )  # fmt: skip
                    # The raw stream, decoded here with the cap on the decoded bytes
                    # (httpx's own decoders inflate a chunk without a bound: codings.py).
                    body = BoundedBody(
                        raw.headers.get("content-encoding", ""), policy.max_body_bytes
                    )
                    async for chunk in raw.aiter_raw():
                        if body.feed(chunk):
                            break
                except Undecodable as exc:
                    exc.status = raw.status_code
                    raise
                finally:
                    await raw.aclose()
        except TimeoutError as exc:
            raise httpx.ReadTimeout("request timed out", request=request) from exc
        return Response(
            raw.status_code, raw.headers, body.body, str(raw.url), 1,
            self.clock() - started, truncated=body.truncated,
        )  # fmt: skip

    @staticmethod
    async def _follow(
        client: httpx.AsyncClient, request: httpx.Request, follow: bool
    ) -> httpx.Response:
        """The streamed answer to `request`, redirects followed here when `follow`: httpx would
        read (and inflate, without a bound) each redirect's body before the next hop."""
        raw = await client.send(request, stream=True, follow_redirects=False)
        hops = 0
        while follow and raw.next_request is not None:
            await raw.aclose()  # a redirect's body is never read
            hops += 1
            if hops > client.max_redirects:
                raise httpx.TooManyRedirects(
                    "Exceeded maximum allowed redirects.", request=raw.next_request
                )
            raw = await client.send(raw.next_request, stream=True, follow_redirects=False)
        return raw


def _params(params: Params) -> list[tuple[str, str | int | float | bool | None]]:
    items = params.items() if isinstance(params, Mapping) else params
    return [(k, v) for k, v in items]


def _excerpt(body: bytes, limit: int = 160) -> str:
    """The start of an error body for a message, secrets masked before it is cut (a cut key
    would no longer be recognised)."""
    text = " ".join(redact(body[: limit * 4].decode("utf-8", errors="replace")).split())
    if not text:
        return ""
    return f": {text[:limit]}{'...' if len(text) > limit else ''}"


_default: Runner | None = None


def default_runner() -> Runner:
    """The process-wide runner used when the service was not given one."""
    global _default
    if _default is None:
        _default = Runner()
    return _default
