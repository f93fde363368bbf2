"""Pure helpers the adapters' parsers share: decoding bodies, checking shapes, reading fields.

A provider's body is untrusted input: every helper either returns a clean value or raises a
`ProviderError` that names what was wrong (`malformed response: `items` should be list`), so a
garbage answer ends the platform with a clear message instead of a crash somewhere later.
"""

from __future__ import annotations

import email.utils
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import SecretStr

from fanfuse.support.redact import redact
from fanfuse.wire.errors import ProviderError


def secret(value: SecretStr | None) -> str:
    return value.get_secret_value() if value is not None else ""


def load_json(platform: str, body: bytes) -> Any:
    """The body as JSON, or a `ProviderError` that says the provider sent something else."""
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        start = redact(body[:400].decode("utf-8", errors="replace")).strip()[:80]
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
    """A short human-readable reason from an error body (JSON `message`/`error` or text).

    Providers echo the key they were sent in such bodies ("invalid token sk-..."): secrets are
    masked before the reason is cut to `limit`, while they are still whole.
    """
    text = redact(body.decode("utf-8", errors="replace"))
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return " ".join(text[:1000].split())[:limit]
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
