"""The public HTTP API's rules, without a web framework: what the Cloud Functions and `serve` share.

The functions (`fronts/functions.py`, Flask under functions-framework) and `fanfuse serve`
(`fronts/serve/`, Starlette under uvicorn) answer the same three public calls, so the same input
must get the same status and the same JSON body from both. Everything that decides that lives here,
in terms of bytes and models: the body size limit, how a body becomes JSON (or a 400 naming `body`),
how a model's errors become a 400 naming each field, what a task id may look like, and how an error
becomes (status, body, headers). Each front only reads its framework's request and writes its
framework's response.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from pydantic import BaseModel, ValidationError

from fanfuse.wire.errors import (
    FanfuseError,
    InvalidRequest,
    MethodNotAllowed,
    PayloadTooLarge,
    RetryLater,
    Unauthorized,
    UnsupportedMediaType,
    problems_of,
)
from fanfuse.wire.inbound import MAX_JSON_DEPTH, Inbound
from fanfuse.wire.models import Problem

MAX_BODY_BYTES = 64 * 1024
"""A request is at most 5 queries of 500 characters and a few options: 64 KiB is plenty."""
TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
"""What a task id may look like (the service makes uuid4 hex ids); also a safe document id."""


class CancelRequest(Inbound):
    """The body of `cancel_search` (or `?task_id=` instead). No control character: it is an
    `Inbound` model (inbound.py)."""

    task_id: str


def too_large() -> PayloadTooLarge:
    return PayloadTooLarge(f"the body is larger than {MAX_BODY_BYTES} bytes")


def declared_length(header: str | None) -> int | None:
    """A `Content-Length` header's value, None when there is none or it is no length (the body
    is then read and cut at the limit as it comes). ASCII digits only, and the limit is checked
    on the digits: `int()` of thousands of them is slow, and past Python's digit limit a
    ValueError, and `str.isdigit` takes `²` for a digit."""
    text = (header or "").strip()
    if not text or not text.isascii() or not text.isdigit():
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(MAX_BODY_BYTES)):
        return MAX_BODY_BYTES + 1  # too large, whatever the number
    return min(int(digits), MAX_BODY_BYTES + 1)


def check_length(content_length: int | None) -> None:
    """413 at once from a declared length, before reading a byte of the body."""
    if content_length is not None and content_length > MAX_BODY_BYTES:
        raise too_large()


def decode_json(raw: bytes, content_type: str | None = "application/json") -> Any:
    """The body as JSON, or a 400/413/415 that says what is wrong with it.

    The checks run cheapest first and before the parser sees a byte: size, emptiness, media
    type (`application/json`, any parameters), then nesting depth by a linear scan, so a body
    of 60,000 `[` is a 400, not the parser's RecursionError. An integer longer than Python's
    `int_max_str_digits` (4,300 by default: the guard against int()'s quadratic conversion)
    makes `json.loads` raise a plain ValueError: a 400 naming `body` too, since the parser
    does not say where (no field takes a number of more than a few digits anyway).
    """
    if len(raw) > MAX_BODY_BYTES:
        raise too_large()
    if not raw.strip():
        raise InvalidRequest([Problem(field="body", problem="expected a JSON object, got nothing")])
    media = (content_type or "").split(";")[0].strip().lower()
    if media != "application/json":
        shown = f"{media!r}" if media else "no Content-Type"
        raise UnsupportedMediaType(f"the body must be sent as application/json, not {shown}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest([Problem(field="body", problem="not UTF-8 text")]) from None
    if json_depth(text) > MAX_JSON_DEPTH:
        problem = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
        raise InvalidRequest([Problem(field="body", problem=problem)])
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        problem = f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        raise InvalidRequest([Problem(field="body", problem=problem)]) from None
    except ValueError:  # the only other one: an integer past Python's digit limit
        problem = f"a number has more than {sys.get_int_max_str_digits()} digits"
        raise InvalidRequest([Problem(field="body", problem=problem)]) from None


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in `text`, brackets inside strings ignored
    (whether the text is valid JSON is the parser's question).

    In C, not a Python loop over the characters: the strings are cut out by one regular
    expression (escapes included), an unterminated one with everything after it, then what
    is not a bracket, and the running depth is `accumulate` over what is left: about 0.2 ms
    for a 64 KiB body of ordinary JSON, and a few ms for one made of nothing but brackets.
    """
    outside = _STRING.sub("", text)
    quote = outside.find('"')
    if quote >= 0:
        outside = outside[:quote]
    brackets = _NOT_BRACKET.sub("", outside)
    return max(accumulate(map(_STEP.__getitem__, brackets), initial=0))


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
"""A JSON string, its escapes included (the unrolled form: no nested quantifier backtracks)."""
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def parse(model: type[BaseModel], data: Any) -> Any:
    """Validate `data` as `model`, turning pydantic's errors into a 400 listing each field."""
    if not isinstance(data, dict):
        raise InvalidRequest([Problem(field="body", problem="expected a JSON object")])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidRequest(problems_of(exc)) from None


def check_task_id(value: Any, field: str = "task_id") -> str:
    if value is None or value == "":
        raise InvalidRequest([Problem(field=field, problem="field required")])
    if not isinstance(value, str) or not TASK_ID.match(value):
        raise InvalidRequest(
            [Problem(field=field, problem="not a task id (letters, digits, - and _; at most 128)")]
        )
    return value


def require_method(target: str, method: str, allowed: tuple[str, ...]) -> None:
    if method not in allowed:
        raise MethodNotAllowed(target, method, allowed)


@dataclass(frozen=True)
class Answer:
    """An error as the fronts send it: status, JSON body, extra headers (`Allow` for a 405)."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def error_answer(exc: FanfuseError) -> Answer:
    headers = {}
    if isinstance(exc, MethodNotAllowed):
        headers["Allow"] = ", ".join(exc.allowed)
    elif isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = 'Bearer realm="fanfuse", ApiKey header="X-Api-Key"'
    elif isinstance(exc, RetryLater):
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
    return Answer(exc.status_code, exc.body().model_dump(mode="json"), headers)
