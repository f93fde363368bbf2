"""Secrets never leave: what a secret looks like, and `redact`, which masks it in text.

Why one module: a credential leaves through text made from something that carries it (a URL
with Google's `key=` or a password in a base URL, a request header such as `Authorization` or
`X-Subscription-Token`, a provider's error body that echoes the key it was sent), and all such
text passes a few shared points, each of which applies this module: the runner (call records,
retry errors), `ProviderError` (every message about a provider's answer), `CallRecord` (every
call in a platform document), the service (an unexpected error's text) and logging (the
`httpx` logger always; every record once an entry point called `install_log_redaction`).

A secret is recognised two ways:

- by value: what this process sent as a credential (the runner `remember`s every request's
  credential headers, key parameters and URL passwords, so an echo is caught whatever the
  provider), and the values of environment variables whose names say they hold one
  (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`...: provider keys, LLM keys, the tasks'
  HMAC secret), in every spelling a leak could take (as is, URL-encoded, JSON-escaped);
- by shape, whatever the value: a credential header's value, a Bearer token, a JSON Web
  Token, a fanfuse API key's secret part, a query parameter named like a key (`key`,
  `api_key`, `token`, `signature`...), a URL's userinfo.

Values shorter than MIN_SECRET_LEN are not masked by value: masking a 4-character string
everywhere would mangle messages while protecting no real key (shapes still apply).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

MASK = "***"
MIN_SECRET_LEN = 8

SECRET_NAME = re.compile(
    r"(?:^|[_\-.])(?:api_?key|key|token|secret|password|passwd|signature|sig|auth|"
    r"authorization|cookie)$",
    re.IGNORECASE,
)
"""A header, query parameter or environment variable whose last word says it holds a secret:
`key`, `X-Api-Key`, `X-Subscription-Token`, `FANFUSE_TASKS_HMAC_SECRET`; not `max_tokens` or
`FANFUSE_CONTENT_TOKEN_BUDGET`."""

_HEADER = re.compile(
    r"(?i)\b(authorization|proxy-authorization|x-api-key|api-key|x-goog-api-key|"
    r"x-subscription-token|cookie)(['\"]?\s*[:=]\s*['\"]?)((?:bearer|basic|token)\s+)?"
    r"([^\s'\",;}&]{12,})"
)
"""A credential in a header: 12 characters at least, so that a message's word after
`X-Api-Key:` is not taken for one (shorter credentials are masked by value)."""
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*")
_API_KEY = re.compile(r"\b(ff_[A-Za-z0-9]+_)[A-Za-z0-9_\-]{16,}")
"""A fanfuse API key, `ff_{key_id}_{secret}` (models.ApiKey): the id stays, to say which."""
_JWT = re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*")
"""A JSON Web Token (an ID token, a Cloud Tasks OIDC token): header and claims start `eyJ`."""
_PARAM = re.compile(r"([?&;])([A-Za-z0-9_.\-]+)=([^&#\s'\"<>]*)")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@?#]+@")

_remembered: set[str] = set()
_lock = threading.Lock()


def _no_environment() -> Mapping[str, str]:
    return {}


_environment: Callable[[], Mapping[str, str]] = _no_environment
"""Reads the process environment: the settings package sets it when it is imported (`watch`),
since it is the one place that reads the environment, and this layer sits below it."""


def watch(environment: Callable[[], Mapping[str, str]]) -> None:
    """Take the values of secret-named variables from `environment()`, read at each `known`."""
    global _environment
    _environment = environment


def is_secret_name(name: str) -> bool:
    return SECRET_NAME.search(name) is not None


def remember(*values: str) -> None:
    """Mask these values from now on in this process (credentials about to be sent)."""
    fresh = {v for v in values if len(v) >= MIN_SECRET_LEN}
    if fresh - _remembered:
        with _lock:
            _remembered.update(fresh)


def known() -> frozenset[str]:
    """The secret values of this process: remembered ones, and those of secret-named
    environment variables (read each time, so a key set after start counts too)."""
    from_env = {v for k, v in _environment().items() if is_secret_name(k)}
    return frozenset({v for v in from_env if len(v) >= MIN_SECRET_LEN} | _remembered)


def spellings(value: str) -> set[str]:
    """The forms a value takes in a URL, a form body or a JSON document."""
    return {value, quote(value, safe=""), quote(value), quote_plus(value), json.dumps(value)[1:-1]}


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every known secret (and `secrets`) and every credential-shaped value masked."""
    return _apply(text, _forms(secrets))


def _forms(secrets: Iterable[str]) -> list[str]:
    """Every spelling of every secret to mask, longest first (a key that contains another is
    masked whole)."""
    values = {v for v in (*secrets, *known()) if len(v) >= MIN_SECRET_LEN}
    return sorted({f for v in values for f in spellings(v)}, key=len, reverse=True)


def _apply(text: str, forms: list[str]) -> str:
    for form in forms:
        if form in text:
            text = text.replace(form, MASK)
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3) or ''}{MASK}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _API_KEY.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _JWT.sub(MASK, text)
    return _PARAM.sub(_mask_param, text)


def _mask_param(match: re.Match[str]) -> str:
    sep, name, value = match.groups()
    return f"{sep}{name}={MASK}" if value and is_secret_name(name) else match.group(0)


def redact_url(url: str, secret_params: Iterable[str] = ()) -> str:
    """The URL as it may be shown: userinfo masked, and the values of `secret_params` and of
    every key-named parameter; the rest of the query is kept byte for byte."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    named = set(secret_params)
    query = "&".join(
        f"{name}={MASK}" if sep and (name in named or is_secret_name(name)) else item
        for item in parts.query.split("&")
        for name, sep, _ in [item.partition("=")]
    )
    return redact(urlunsplit(parts._replace(netloc=netloc, query=query)))


def credentials(
    url: str,
    headers: Mapping[str, str],
    fields: Iterable[tuple[str, object]],
    secret_params: Iterable[str],
) -> list[str]:
    """The credential values a request carries: secret-named headers (without a `Bearer` or
    `Basic` scheme); `secret_params` and key-named fields (query parameters, and the top level
    of a JSON or form body, where some APIs take the key); and the URL's password."""
    found = []
    for name, value in headers.items():
        if is_secret_name(name):
            found.append(value.split(" ", 1)[1] if " " in value else value)
    named = set(secret_params)
    found += [
        str(v)
        for k, v in fields
        if (k in named or is_secret_name(k)) and isinstance(v, str | int | float)
    ]
    password = urlsplit(url).password
    if password:
        found.append(password)
    return found


# -- logging ---------------------------------------------------------------------------------


def redact_record(record: logging.LogRecord) -> None:
    """Mask secrets in a record in place: its arguments one by one (so a formatter that reads
    them still finds them), its message, its traceback and stack text."""
    forms = _forms(())

    def clean(value: Any) -> Any:
        if value is None or isinstance(value, (int, float)):
            return value
        text = str(value)
        masked = _apply(text, forms)
        return value if masked == text else masked

    if isinstance(record.args, Mapping):
        record.args = {k: clean(v) for k, v in record.args.items()}
    elif isinstance(record.args, tuple):
        record.args = tuple(clean(a) for a in record.args)
    try:  # the template is judged with its arguments in ("Authorization: %s" is no secret)
        message = record.getMessage()
    except (TypeError, ValueError):  # a bad format string: logging reports it, not us
        message = None
    if message is not None and (masked := _apply(message, forms)) != message:
        record.msg, record.args = masked, None  # in the template, or formed across arguments
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = _apply(record.exc_text, forms)
    if record.stack_info:
        record.stack_info = _apply(record.stack_info, forms)


class SecretFilter(logging.Filter):
    """A filter that masks secrets in every record it sees (for a logger or a handler)."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


def install_log_redaction() -> None:
    """Mask secrets in every log record this process makes from now on, whatever logger made
    it and whatever handler writes it (a record factory, since a filter on a logger does not
    see its children's records). For entry points: the CLI and the functions call it; an
    application embedding fanfuse decides for its own process. Idempotent."""
    current = logging.getLogRecordFactory()
    if getattr(current, "redacts_secrets", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = current(*args, **kwargs)
        redact_record(record)
        return record

    marked: Callable[..., logging.LogRecord] = factory
    marked.redacts_secrets = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(marked)
