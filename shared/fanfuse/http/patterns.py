"""The regular expressions the OpenAPI document gives the request's strings.

Each one states a rule the validation (wire/request.py, wire/inbound.py) already applies, in the
form a client's generator can use: what the document allows is taken, what it refuses is refused
(schemathesis checks both directions against serve).
"""

from __future__ import annotations

from typing import Any

from fanfuse.wire.inbound import TEXT_PATTERN
from fanfuse.wire.options import COUNTRIES

BLANKS = r"[\t\n \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*"
"""What `str.strip` takes off a request string that holds no forbidden character."""
_FORBIDDEN = TEXT_PATTERN.removeprefix("^[^").removesuffix("]*$")
NOT_BLANK = f"^[^{_FORBIDDEN}]*[^\\s{_FORBIDDEN}][^{_FORBIDDEN}]*$"
"""A request string with a character besides blanks, and no forbidden one: a query (every form
of it) is stripped and refused when empty, so a blank one is not valid input."""
COUNTRY = (
    f"^{BLANKS}(?:"
    + "|".join(f"[{c[0]}{c[0].lower()}][{c[1]}{c[1].lower()}]" for c in sorted(COUNTRIES))
    + f"){BLANKS}$"
)
"""An ISO 3166-1 alpha-2 code as `wire.fields.country_code` takes it: any case, blanks around."""
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = rf"{_LABEL}(?:\.{_LABEL})*\.?"
HOST = f"^{BLANKS}{_HOST}{BLANKS}$"
"""A host name in its ASCII form (an international one as punycode): one `_domains` takes.
It takes a Unicode name too; the schema names the form every client can send."""
HOSTS = f"^{BLANKS}(?:{_HOST})?{BLANKS}(?:,{BLANKS}(?:{_HOST})?{BLANKS})*$"
"""Host names separated by commas, as the string form of a domain list (blank entries dropped)."""


def strings(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Every string schema in `schema`, through `items` and `anyOf`."""
    found = [schema] if schema.get("type") == "string" else []
    for child in [schema.get("items"), *schema.get("anyOf", [])]:
        if isinstance(child, dict):
            found += strings(child)
    return found


def items(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The item schemas of every array in `schema`, through `anyOf`."""
    found = [schema["items"]] if isinstance(schema.get("items"), dict) else []
    for child in schema.get("anyOf", []):
        if isinstance(child, dict):
            found += items(child)
    return found
