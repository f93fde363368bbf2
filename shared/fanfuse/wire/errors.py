"""Errors fanfuse raises on purpose, each with its HTTP status; `fronts/functions.py` maps them to
answers."""

from __future__ import annotations

from pydantic import ValidationError

from fanfuse.support.redact import redact
from fanfuse.wire.inbound import MAX_PROBLEMS
from fanfuse.wire.models import ErrorBody, FailureKind, Problem


class FanfuseError(Exception):
    status_code = 500
    code = "internal"

    def body(self) -> ErrorBody:
        return ErrorBody(error=self.code, message=str(self))


class InvalidRequest(FanfuseError):
    status_code = 400
    code = "invalid_request"

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p.field}: {p.problem}" for p in problems))

    def body(self) -> ErrorBody:
        return ErrorBody(error=self.code, message=str(self), problems=self.problems)


def problems_of(exc: ValidationError) -> list[Problem]:
    """pydantic's errors as `{field, problem}` pairs a user can act on (an InvalidRequest's):
    the first MAX_PROBLEMS, then one `body` problem saying how many more there were, so a body
    of 5,000 unknown fields gets an answer of 51 lines, not 5,000 (the `Inbound` check lists
    its own that way)."""
    problems = []
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    listed = errors if len(errors) <= MAX_PROBLEMS + 1 else errors[:MAX_PROBLEMS]
    for err in listed:
        loc = ".".join(str(p) for p in err["loc"]) or "body"
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "field required"
        else:
            msg = err["msg"].removeprefix("Value error, ")
        problems.append(Problem(field=loc, problem=msg))
    if len(listed) < len(errors):
        more = len(errors) - MAX_PROBLEMS
        problems.append(Problem(field="body", problem=f"and {more} more problems not listed"))
    return problems


class TaskNotFound(FanfuseError):
    status_code = 404
    code = "not_found"

    def __init__(self, task_id: str) -> None:
        super().__init__(f"no search with task_id {task_id!r}")


class TaskExpired(FanfuseError):
    """A search past its `expires_at`: 410 Gone, and nothing of its document.

    410 rather than 404 because the caller knew the id, and "it existed and is gone for good"
    tells a poller to stop, where 404 reads as a wrong id. The ids stay undisclosed: a search
    with an owner is expired only for its owner, anyone else still gets TaskNotFound
    (`fanfuse.auth.callers.visible_status`). `owner` is kept for that check, never shown.
    """

    status_code = 410
    code = "expired"

    def __init__(self, task_id: str, owner: str | None) -> None:
        self.task_id, self.owner = task_id, owner
        super().__init__(f"search {task_id!r} has expired: its results are no longer kept")


class TaskConflict(FanfuseError):
    status_code = 409
    code = "conflict"


class MethodNotAllowed(FanfuseError):
    status_code = 405
    code = "method_not_allowed"

    def __init__(self, target: str, method: str, allowed: tuple[str, ...]) -> None:
        self.allowed = allowed  # the answer's `Allow` header
        super().__init__(f"{target} accepts {' or '.join(allowed)}, not {method}")


class PayloadTooLarge(FanfuseError):
    status_code = 413
    code = "payload_too_large"


class UnsupportedMediaType(FanfuseError):
    status_code = 415
    code = "unsupported_media_type"


class Unauthorized(FanfuseError):
    """No credentials, or credentials that do not verify: 401 (with `WWW-Authenticate`).

    The message says which credential failed and why (expired, wrong audience, unknown key),
    never the credential itself.
    """

    status_code = 401
    code = "unauthorized"


class Forbidden(FanfuseError):
    """Verified credentials that may not do this (a revoked key, a task token from someone
    other than the tasks service account): 403."""

    status_code = 403
    code = "forbidden"


class RetryLater(FanfuseError):
    """An error whose answer says when to try again: `Retry-After` (api.error_answer), in whole
    seconds rounded up from `retry_after_s`."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message)


class RateLimited(RetryLater):
    """A caller over its quota: 429 with `Retry-After` (whole seconds, rounded up)."""

    status_code = 429
    code = "rate_limited"


class TooManyStreams(RateLimited):
    """A caller at its cap of open streams (event streams, MCP listen streams): 429 with
    `Retry-After`; nothing was opened (fanfuse.http.streams)."""

    code = "too_many_streams"


class OverBudget(InvalidRequest):
    """A plan whose estimated cost is over the request's cap (rules/budget.py): a 400 naming
    `max_cost_usd`, with the estimate and how to fit; nothing was written or asked."""

    code = "over_budget"

    def __init__(self, problem: str, estimate_usd: float) -> None:
        self.estimate_usd = estimate_usd
        super().__init__([Problem(field="max_cost_usd", problem=problem)])


class BudgetSpent(RateLimited):
    """A caller whose daily budget cannot pay for the plan: 429 with `Retry-After` until the
    UTC day ends, when the budget is whole again; nothing was written or asked."""

    code = "budget_spent"


class UnknownPlatform(InvalidRequest):
    """A platform task names a platform its search does not have.

    A 400 naming the field `platform`, like any other bad field: the message is well formed but
    can never succeed, so a Cloud Tasks target acknowledges it instead of having it retried.
    """

    def __init__(self, platform: str) -> None:
        self.platform = platform
        problem = f"{platform!r} is not a platform of this search"
        super().__init__([Problem(field="platform", problem=problem)])


class Unavailable(FanfuseError):
    """An unexpected failure, taken as infrastructure (Firestore, Cloud Tasks): try again later."""

    status_code = 503
    code = "unavailable"


class StartTooSlow(Unavailable, RetryLater):
    """Storage was so slow at start that too little of the search's time budget was left:
    503 with `Retry-After`, and nothing of the search is kept (SearchService.start)."""


class StoreUnavailable(Unavailable, RetryLater):
    """The store did not answer in time (a stalled or overloaded Firestore, a transaction still
    contended when its time ran out): 503 with `Retry-After`, retried by Cloud Tasks. Every
    Firestore call is bounded (store/firestore_calls.py), so a stall ends here, not in a hang."""

    code = "store_unavailable"


class Unreachable(Unavailable):
    """The HTTP API could not be reached, or did not answer (refused, unknown host, timed out).

    Raised by the client with the address in the message, so `fanfuse search --endpoint` says
    in one line which address failed and how, instead of an httpx traceback.
    """


class LeaseHeld(RetryLater):
    """A platform run another delivery holds the live lease of: 503 with `Retry-After` (the time
    left on the lease), so Cloud Tasks tries again once it may have lapsed; no provider is called.
    """

    status_code = 503
    code = "lease_held"


class QueueUnavailable(FanfuseError):
    status_code = 503
    code = "queue_unavailable"


# ---------------------------------------------------------------------------------------------
# Errors of a platform run: they end one platform (or one page fetch), never the search.


class ProviderError(Exception):
    """A platform failed in a way worth telling the user precisely (bad key, garbage body...).

    Raised by the network layer (retries exhausted) and by the platforms (an error answer, a
    malformed body); the service turns it into the platform's `failed` state with this message.
    The message is often made from the provider's answer, which may echo the key it was sent:
    it is redacted here, once for every platform (see `fanfuse.support.redact`).

    `kind` says whose failure it is, for the platform's breaker (`breaker.counts_against_provider`):
    it is decided where the status is known (the runner, `HttpPlatform`, a platform's own
    check). None: not said; `fault` takes it as the provider's ERROR, as every failure was
    before kinds existed, so an unclassified failure still protects the provider.
    """

    default_kind: FailureKind | None = None

    def __init__(self, platform: str, message: str, kind: FailureKind | None = None) -> None:
        message = redact(message)
        super().__init__(f"{platform}: {message}")
        self.platform = platform
        self.message = message
        self.kind = kind or self.default_kind

    @property
    def fault(self) -> FailureKind:
        return self.kind or FailureKind.ERROR


class Blocked(ProviderError):
    """The provider answered with an anti-bot or captcha page instead of results."""

    default_kind = FailureKind.CAPTCHA


def kind_for_status(status: int | None) -> FailureKind:
    """Whose failure a provider's final HTTP answer is (None: no answer: a timeout, a refused
    or dropped connection).

    429: its rate limit. 401, 402, 403, 407: our credentials, plan or client refused (the
    deployment's key, its paid quota spent, an instance that refuses the client: SearXNG takes
    402 and 403 as access denied too). 408 and 5xx, or no answer: the provider's trouble.
    Any other 4xx (400, 404, 413, 422...) answers the request as asked, which a caller shaped
    (a query too long, an option the provider rejects): the provider is up and said no. That
    includes a deployment's wrong endpoint (404 on every query): it fails fast, and suspending the
    platform would not fix it. A 2xx or 3xx that could not be used (a malformed body) is the
    provider's.
    """
    if status == 429:
        return FailureKind.RATE_LIMITED
    if status in (401, 402, 403, 407):
        return FailureKind.DENIED
    if status is not None and 400 <= status < 500 and status != 408:
        return FailureKind.QUERY
    return FailureKind.ERROR


class Refused(Exception):
    """A URL may not be fetched: its address, scheme or redirect chain is not allowed."""


class NotExtracted(Exception):
    """A page was fetched but holds no text worth keeping."""


class Cancelled(Exception):
    """The search was cancelled; a worker stops between stages."""


class CorpusError(ValueError):
    """A corpus or query file that cannot be used; the message names the file (and line)."""


class DocumentTooLarge(ValueError):
    """A document would exceed Firestore's 1 MiB cap (rejected here, with its path and size)."""


class ApiError(FanfuseError):
    """An error answer of the HTTP API, as a client of it sees it (status and JSON body)."""

    def __init__(self, status: int, body: ErrorBody) -> None:
        self.status_code = status
        self.error = body
        super().__init__(body.message)


def unwrap_group_error(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
