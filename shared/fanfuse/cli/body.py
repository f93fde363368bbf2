"""What `fanfuse search` reads besides its options: a whole request body (`--request FILE`), and
numbers given as text, so that a bad value reaches the request model and is named like a 400."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fanfuse.cli.search_view import fail


def read_request(source: str) -> dict[str, Any]:
    """The JSON object in the file `source` (`-`: stdin); a bad one is one error naming it."""
    name = "stdin" if source == "-" else source
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise fail(f"{name}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"{name}: cannot read it ({exc})") from None
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"{name}: not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise fail(f"{name}: expected a JSON object (a request body), got {_json_kind(body)}")
    return body


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "null" if value is None else "a number"


def number_or_text(text: str | None) -> float | str | None:
    """`--timeout`, `--max-cost-usd` as a number when it is one; else as given, for the model to
    name the field."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return text
