"""Request fields that take more than one form, and how a 400 quotes a refused value.

A list field also takes one string (`"a, b"` or `["a", "b"]`), so its before-validator and the
JSON schema it publishes (`one_or_list`: the MCP tools' input schema, the OpenAPI document) are
written together here, next to the domain and country forms they serve.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from fanfuse.wire.options import COUNTRIES, MAX_DOMAINS, domain_problem, normalize_domain

MAX_HOST_CHARS = 253
"""A host name's length at most (RFC 1035): checked before the name is IDNA-encoded."""
MAX_SHOWN_CHARS = 60
"""How much of a refused value a 400 quotes back: enough to recognise it, never the body."""


def shown(value: str) -> str:
    """`value` quoted for a problem, cut to MAX_SHOWN_CHARS (a 400 never echoes a whole body)."""
    if len(value) <= MAX_SHOWN_CHARS:
        return repr(value)
    return f"{value[:MAX_SHOWN_CHARS]!r}... ({len(value)} characters)"


def one_or_list(
    max_items: int | None = None, *, min_items: int = 1, nullable: bool = False, **item: Any
) -> Callable[[dict[str, Any]], None]:
    """The JSON schema of a list field whose before-validator also takes one string (and
    `null`, when `nullable`: the validator reads it as an empty list).

    pydantic sees only `list[str]`; this rewrites the field's schema to what the validator
    takes (`"a"` or `["a", "b"]`), with the list's limits, so the request's JSON schema (the MCP
    tools' input schema, the OpenAPI document) says what the API accepts.
    """

    def rewrite(schema: dict[str, Any]) -> None:
        string = {"type": "string", **item}
        array: dict[str, Any] = {"type": "array", "items": string}
        if min_items:
            array["minItems"] = min_items
        if max_items is not None:
            array["maxItems"] = max_items
        schema.pop("type", None)
        schema.pop("items", None)
        schema["anyOf"] = [string, array, *([{"type": "null"}] if nullable else [])]

    return rewrite


def _domains(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list):
        raise ValueError("must be a list of host names")
    if len(value) > MAX_DOMAINS:
        raise ValueError(f"at most {MAX_DOMAINS} domains, got {len(value)}")
    domains: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise ValueError("domains must be strings")
        if len(item.strip().rstrip(".")) > MAX_HOST_CHARS:  # before IDNA encodes it
            raise ValueError(f"{shown(item.strip())} is not a host name")
        host = normalize_domain(item)
        problem = domain_problem(host)
        if problem:
            raise ValueError(problem)
        if host not in domains:  # at most MAX_DOMAINS of them
            domains.append(host)
    return domains


Domains = Annotated[
    list[str],
    BeforeValidator(_domains),
    Field(json_schema_extra=one_or_list(MAX_DOMAINS, min_items=0, nullable=True)),
]


def country_code(value: str) -> str:
    code = value.strip().upper()
    if code not in COUNTRIES:
        raise ValueError(
            f"{shown(value)} is not an ISO 3166-1 alpha-2 country code (e.g. US, DE, CN)"
        )
    return code
