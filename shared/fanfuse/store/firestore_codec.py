"""Pydantic models <-> Firestore values, and a document's storage size by Firestore's rules."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum
from functools import cache
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic_core import to_jsonable_python

from fanfuse.wire.models import PlatformRun

NESTED_ARRAY = "fanfuse_array"
"""Firestore has no array directly inside an array: such an inner array is stored as the map
`{NESTED_ARRAY: [...]}` and unwrapped on read (only free-form `metadata` can hold one)."""


def encode(value: Any, *, in_array: bool = False) -> Any:
    """A `model_dump(mode="python")` value as Firestore stores it.

    Enums become their values, tuples and sets lists, naive datetimes UTC, an array inside an
    array a wrapped map (see NESTED_ARRAY); anything else that Firestore cannot hold (a value
    inside `metadata`, say) becomes its JSON form.
    """
    if value is None or isinstance(value, bool | int | float | bytes):
        return value
    if isinstance(value, Enum):
        return encode(value.value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [encode(v, in_array=True) for v in value]
        return {NESTED_ARRAY: items} if in_array else items
    return encode(to_jsonable_python(value), in_array=in_array)


def decode(value: Any) -> Any:
    """The inverse of `encode` for what it had to wrap: nested arrays come back as lists."""
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(NESTED_ARRAY), list):
            return [decode(v) for v in value[NESTED_ARRAY]]
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def model_data(model: BaseModel) -> dict[str, Any]:
    data: dict[str, Any] = encode(model.model_dump(mode="python"))
    return data


@cache
def _field_adapter(name: str) -> TypeAdapter[Any] | None:
    field = PlatformRun.model_fields.get(name)
    if field is None or field.annotation is None:
        return None
    return TypeAdapter(field.annotation)


def patch_data(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Validate top-level PlatformRun fields one by one (no read needed) and encode them.

    Unknown names are dropped, as the SQLite store drops them when it re-validates the document;
    a value of the wrong type raises pydantic's ValidationError, as it does there.
    """
    out: dict[str, Any] = {}
    for name, value in fields.items():
        adapter = _field_adapter(name)
        if adapter is None:
            continue
        out[name] = encode(adapter.dump_python(adapter.validate_python(value), mode="python"))
    return out


def _value_size(value: Any) -> int:
    """Storage size of one value, by Firestore's documented rules."""
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, int | float | datetime):
        return 8
    if isinstance(value, str):
        return len(value.encode()) + 1
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, Mapping):
        return sum(len(str(k).encode()) + 1 + _value_size(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_value_size(v) for v in value)
    return len(json.dumps(value, default=str).encode()) + 1


def document_size(path: str, data: Mapping[str, Any]) -> int:
    """Storage size of a document: its name, its fields, and 32 bytes of overhead."""
    name = sum(len(part.encode()) + 1 for part in path.split("/")) + 16
    return name + _value_size(data) + 32


def runs_in(docs: Mapping[str, Any]) -> list[PlatformRun]:
    """The platform runs among read snapshots (by path), the missing ones left out."""
    return [PlatformRun.model_validate(decode(d.to_dict())) for d in docs.values() if d.exists]
