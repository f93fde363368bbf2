"""The published JSON schema says what the API takes: what it accepts, checked with jsonschema.

Found by mutation testing (`scripts/mutants wire`, docs/mutants.md). `one_or_list` runs when a
model class is built, at import, before mutmut picks a mutant: so it is tested here on models
built by the tests themselves, as a request model would use it.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, Field

from fanfuse.wire.fields import one_or_list
from fanfuse.wire.models import SearchRequest


def listed() -> type[BaseModel]:
    """A model built when the test runs (see the module's docstring)."""

    class Listed(BaseModel):
        names: list[str] = Field(json_schema_extra=one_or_list(3, minLength=1))

    return Listed


def nullable() -> type[BaseModel]:
    class Nullable(BaseModel):
        names: list[str] = Field(json_schema_extra=one_or_list(min_items=0, nullable=True))

    return Nullable


def accepts(model: type[BaseModel], value: Any) -> bool:
    check = jsonschema.Draft202012Validator(model.model_json_schema())
    return bool(check.is_valid({"names": value}))


@pytest.mark.parametrize(
    ("value", "taken"),
    [
        ("a", True),
        (["a"], True),
        (["a", "b", "c"], True),
        ([], False),  # at least one item by default
        (["a", "b", "c", "d"], False),  # at most max_items
        ([""], False),  # the item keywords hold for each item
        ("", False),  # and for the one string
        ([1], False),
        (1, False),
        (None, False),  # null only when nullable
    ],
)
def test_a_list_field_takes_one_string_or_a_bounded_list(value: Any, taken: bool) -> None:
    """Kills `one_or_list`'s string, array and null schemas misnamed or mistyped, its limits
    (`minItems`, `maxItems`) lost or misspelt, and the field's own `type: array` left beside
    the `anyOf`."""
    assert accepts(listed(), value) == taken


@pytest.mark.parametrize(
    ("value", "taken"), [(None, True), ([], True), (["a", "b", "c", "d"], True), (1, False)]
)
def test_a_nullable_list_field_takes_null_and_any_length(value: Any, taken: bool) -> None:
    assert accepts(nullable(), value) == taken


def test_a_field_with_its_own_pattern_keeps_it() -> None:
    """The free-text pattern (inbound.TEXT_PATTERN) goes only on strings with no pattern of
    their own: `language`'s stricter one stays in the schema, as the API applies it. Kills
    `text_schema`'s `and` -> `or` and the `pattern` key misspelt in the set it tests."""
    check = jsonschema.Draft202012Validator(SearchRequest.model_json_schema())
    assert check.is_valid({"query": "q", "language": "pt-BR"})
    assert not check.is_valid({"query": "q", "language": "english!"})
