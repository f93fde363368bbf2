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
