"""What every string from outside must be: free of characters no person means, wherever it sits.

A request body reaches logs, documents, provider URLs, C libraries and people's screens; a NUL
or an escape sequence in any string of it (a platform name, a domain, a country code, a key of
a free-form dict) is never something a person meant, and neither is text that reads otherwise
than it is: a bidi override that shows `laser` for what is stored as `resal`, a zero-width
character that makes two identical-looking queries two cache keys, or a word no filter sees.
`Inbound` is the base of the public request models: it walks the raw input once, before any
field validator, so the rule holds for every field, present and future, and each offending
string is a 400 naming its dotted path (`query.1`, `weights`) and the code point, the same in
every runtime, the CLI and the Python API. Its JSON schema says the same with a `pattern` on
every free string and on the keys of every map, so a generated request (schemathesis) knows
which strings are valid.

The rule is for every string, not the queries alone. The query is the only truly free text of
a request, but every other string is echoed somewhere (an unknown platform name is quoted in the
400, a key of `weights` in a log line), and a bidi override in an echo spoofs the message as
well as it spoofs a query; no other field has a use for these characters either. One rule
everywhere is also one pattern in the schema.

Refused, each named by its code point (`U+202E`) in the problem:

- control characters: C0 but tab and newline, DEL, and C1 (U+0080-U+009F);
- bidi controls (Unicode's Bidi_Control property): U+061C, U+200E, U+200F, U+202A-U+202E,
  U+2066-U+2069;
- zero-width characters: U+200B, U+2060 and U+FEFF always; the joiners U+200C and U+200D
  unless they join (`joins`): Persian, Indic scripts and emoji sequences need them, and a
  person typing those writes them, where one between Latin letters only hides something.

The schema's pattern refuses what is always refused; the joiners' context is beyond a portable
pattern (it needs Unicode categories), so the schema lets them through and the API decides.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from itertools import islice
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

_CONTROL = r"\x00-\x08\x0b-\x1f\x7f-\x9f"
_BIDI = r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_ZERO_WIDTH = r"\u200b\u2060\ufeff"
JOINERS = "\u200c\u200d"
CONTROL = re.compile(f"[{_CONTROL}]")
"""C0 control characters but tab and newline, DEL, and C1: nothing a person types, and NUL in
particular ends strings in some of the C libraries a request reaches."""
BIDI = re.compile(f"[{_BIDI}]")
"""The bidi controls: they reorder how the text around them is shown, not what it is."""
UNSEEN = re.compile(f"[{_CONTROL}{_BIDI}{_ZERO_WIDTH}{JOINERS}]")
"""Every character the rule may refuse, in one linear scan (the joiners then by context)."""
TEXT_PATTERN = f"^[^{_CONTROL}{_BIDI}{_ZERO_WIDTH}]*$"
"""The same rule as a JSON Schema `pattern` (ECMA-262 and Python read it alike), but for the
joiners, which only the API judges (see the module's docstring)."""
MAX_JSON_DEPTH = 32
"""A request nests three levels (`{"weights": {"docs": 1}}`); 32 leaves room and keeps the
parser, which recurses per level, far from Python's recursion limit. The API refuses a deeper
body before parsing it; the walk below stops there too, so a cyclic dict from the Python API
cannot make it loop (the model refuses such a shape anyway)."""
MAX_PROBLEMS = 50
"""Problems one 400 lists at most: a body of 10,000 bad strings is refused as surely by the
first 50, and its answer stays small (a last problem says that there were more)."""
VIRAMA = 9
"""The canonical combining class of a virama: a joiner after one shapes an Indic conjunct."""
EMOJI_JOINED = frozenset({"So", "Sk"})
"""Emoji and their skin-tone modifiers: what a ZWJ sequence (👩🏽‍💻) joins."""

Loc = tuple[str | int, ...]


def joins(text: str, at: int) -> bool:
    """Whether the joiner at `text[at]` sits where a script or an emoji sequence uses one:
    after a letter of a script without case (Arabic, Hebrew, Indic, CJK: category Lo), a
    virama, an emoji, a skin tone or the emoji presentation selector, and before a letter of
    such a script or an emoji. Latin on either side, an edge, a space or another joiner: no.
    """
    if at == 0 or at + 1 >= len(text):
        return False
    before, after = text[at - 1], text[at + 1]
    joined_after = unicodedata.category(before) in {"Lo", *EMOJI_JOINED}
    joined_after |= unicodedata.combining(before) == VIRAMA or before == "\ufe0f"
    return joined_after and unicodedata.category(after) in {"Lo", "So"}


def character_problem(text: str) -> str | None:
    """The first character of `text` the rule refuses, as a problem naming its code point, or
    None. One regular-expression scan, so linear in the text."""
    for found in UNSEEN.finditer(text):
        char = found.group()
        code = f"U+{ord(char):04X}"
        if CONTROL.match(char):
            return f"contains the control character {code}"
        if BIDI.match(char):
            return f"contains the bidi control {code}"
        if char in JOINERS:
            if joins(text, found.start()):
                continue
            return (
                f"contains the zero-width character {code} (a joiner is kept only inside a "
                "word of a script that joins, or an emoji sequence)"
            )
        return f"contains the zero-width character {code}"
    return None


def bad_characters(data: object, loc: Loc = ()) -> Iterator[tuple[Loc, str]]:
    """Where decoded JSON holds a character the rule refuses, and which: every string value at
    its own path, and every key at the path of its object (a path never carries the character
    itself, so the error echoes none back). Document order; at most MAX_JSON_DEPTH levels deep.

    Linear, and cheap per item: a string is judged only when one C-level scan finds a
    candidate in it, and only containers are descended into (a number builds no path).
    """
    if isinstance(data, str):
        problem = character_problem(data)
        if problem:
            yield loc, problem
    elif len(loc) >= MAX_JSON_DEPTH:
        return
    elif isinstance(data, dict):
        for key, value in data.items():
            problem = character_problem(key) if isinstance(key, str) else None
            if problem:
                yield loc, f"has a key that {problem}"
            elif isinstance(value, _TEXT_OR_CONTAINER):
                yield from bad_characters(value, (*loc, key))
    elif isinstance(data, list | tuple):
        for i, item in enumerate(data):
            if isinstance(item, str):
                if UNSEEN.search(item):
                    yield from bad_characters(item, (*loc, i))
            elif isinstance(item, _CONTAINER) and item:
                yield from bad_characters(item, (*loc, i))


_CONTAINER = (dict, list, tuple)
_TEXT_OR_CONTAINER = (str, dict, list, tuple)


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
    holds a character the rule refuses (see the module's docstring)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=text_schema)

    @model_validator(mode="before")
    @classmethod
    def _no_unseen_characters(cls, data: Any) -> Any:
        """All offending strings at once (up to MAX_PROBLEMS, then whether there are more),
        each at its path: pydantic keeps the locations of a ValidationError raised here (under
        a nesting model's own, too), so they reach the 400 as fields like any other. Runs
        before the fields' validators, which then never see such a character."""
        found = bad_characters(data)
        errors = [
            InitErrorDetails(
                type=PydanticCustomError("unseen_character", problem), loc=loc, input=None
            )
            for loc, problem in islice(found, MAX_PROBLEMS)
        ]
        if next(found, None) is not None:  # not counted: that would judge every string
            more = PydanticCustomError("more_problems", "and more such strings, not listed")
            errors.append(InitErrorDetails(type=more, loc=(), input=None))
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return data
