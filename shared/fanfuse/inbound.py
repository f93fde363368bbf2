"""What every string from outside must be: free of control characters, wherever it sits.

A request body reaches logs, documents, provider URLs and C libraries; a NUL or an escape
sequence in any string of it (a platform name, a domain, a country code, a key of a free-form
dict) is never something a person meant. `Inbound` is the base of the public request models:
it walks the raw input once, before any field validator, so the rule holds for every field,
present and future, and each offending string is a 400 naming its dotted path (`query.1`,
`weights`), the same in every runtime, the CLI and the Python API. Its JSON schema says the
same with a `pattern` on every free string and on the keys of every map, so a generated
request (schemathesis) knows which strings are valid.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

_CONTROL = r"\x00-\x08\x0b-\x1f\x7f"
CONTROL = re.compile(f"[{_CONTROL}]")
"""C0 control characters but tab and newline, and DEL: nothing a person types, and NUL in
particular ends strings in some of the C libraries a request reaches."""
TEXT_PATTERN = f"^[^{_CONTROL}]*$"
"""The same rule as a JSON Schema `pattern` (ECMA-262 and Python read it alike)."""
MAX_JSON_DEPTH = 32
"""A request nests three levels (`{"weights": {"docs": 1}}`); 32 leaves room and keeps the
parser, which recurses per level, far from Python's recursion limit. The API refuses a deeper
body before parsing it; the walk below stops there too, so a cyclic dict from the Python API
cannot make it loop (the model refuses such a shape anyway)."""

Loc = tuple[str | int, ...]


def control_problem(text: str) -> str | None:
    """The first control character in `text`, as a problem to report, or None."""
    found = CONTROL.search(text)
    return f"contains the control character U+{ord(found.group()):04X}" if found else None


def control_characters(data: object, loc: Loc = ()) -> Iterator[tuple[Loc, str]]:
    """Where decoded JSON holds a control character, and which: every string value at its own
    path, and every key at the path of its object (a path never carries the character itself,
    so the error echoes none back). Document order; at most MAX_JSON_DEPTH levels deep."""
    if isinstance(data, str):
        problem = control_problem(data)
        if problem:
            yield loc, problem
    elif len(loc) >= MAX_JSON_DEPTH:
        return
    elif isinstance(data, dict):
        for key, value in data.items():
            problem = control_problem(key) if isinstance(key, str) else None
            if problem:
                yield loc, f"has a key that {problem}"
            else:
                yield from control_characters(value, (*loc, key))
    elif isinstance(data, list | tuple):
        for i, item in enumerate(data):
            yield from control_characters(item, (*loc, i))


SUBSCHEMAS = ("items", "additionalProperties", "propertyNames")
SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def text_schema(schema: dict[str, Any]) -> None:
    """Put TEXT_PATTERN on every string `schema` leaves free (no pattern, enum or const of its
    own: those are stricter already) and on the keys of every map, in place, through
    `properties`, `items`, `additionalProperties` and the `anyOf` family ($refs are their own
    models' business)."""
    if schema.get("type") == "string" and not {"pattern", "enum", "const"} & schema.keys():
        schema["pattern"] = TEXT_PATTERN
    if schema.get("type") == "object" and isinstance(schema.get("additionalProperties"), dict):
        schema.setdefault("propertyNames", {"pattern": TEXT_PATTERN})
    children = [*schema.get("properties", {}).values()]
    children += [schema[k] for k in SUBSCHEMAS if isinstance(schema.get(k), dict)]
    children += [item for k in SCHEMA_LISTS for item in schema.get(k, [])]
    for child in children:
        if isinstance(child, dict):
            text_schema(child)


class Inbound(BaseModel):
    """The base of a request body from outside: no string in it, at any depth, key or value,
    holds a control character (see the module's docstring)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=text_schema)

    @model_validator(mode="before")
    @classmethod
    def _no_control_characters(cls, data: Any) -> Any:
        """All offending strings at once, each at its path: pydantic keeps the locations of a
        ValidationError raised here (under a nesting model's own, too), so they reach the 400
        as fields like any other. Runs before the fields' validators, which then never see a
        control character."""
        errors = [
            InitErrorDetails(
                type=PydanticCustomError("control_character", problem), loc=loc, input=None
            )
            for loc, problem in control_characters(data)
        ]
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return data
