"""Errors the service raises on purpose; the entry points map them to HTTP answers."""

from __future__ import annotations

from fanfuse.models import ErrorBody, Problem


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


class TaskNotFound(FanfuseError):
    status_code = 404
    code = "not_found"

    def __init__(self, task_id: str) -> None:
        super().__init__(f"no search with task_id {task_id!r}")


class TaskConflict(FanfuseError):
    status_code = 409
    code = "conflict"


class QueueUnavailable(FanfuseError):
    status_code = 503
    code = "queue_unavailable"


# ---------------------------------------------------------------------------------------------
# Errors of a platform run: they end one platform (or one page fetch), never the search.


class ProviderError(Exception):
    """A platform failed in a way worth telling the user precisely (bad key, garbage body...).

    Raised by the network layer (retries exhausted) and by the platforms (an error answer, a
    malformed body); the service turns it into the platform's `failed` state with this message.
    """

    def __init__(self, platform: str, message: str) -> None:
        super().__init__(f"{platform}: {message}")
        self.platform = platform
        self.message = message


class Blocked(ProviderError):
    """The provider answered with an anti-bot or captcha page instead of results."""


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
