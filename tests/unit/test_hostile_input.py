"""Hostile bodies get a specific 4xx naming the problem: deep nesting, control characters,
invisible queries, and JSON sent as another media type (fanfuse.api, the request model)."""

from __future__ import annotations

import json

import pytest

from fanfuse import api
from fanfuse.errors import InvalidRequest, UnsupportedMediaType
from fanfuse.platforms import Registry
from fanfuse.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from tests.fakes import FakePlatform, NoQueue


def body_problem(raw: bytes, content_type: str | None = "application/json") -> str:
    with pytest.raises(InvalidRequest) as info:
        api.decode_json(raw, content_type)
    (problem,) = info.value.problems
    assert problem.field == "body"
    return problem.problem


def test_nesting_past_the_bound_is_a_400_before_the_parser_recurses() -> None:
    deep = b"[" * 30_000 + b"]" * 30_000  # within 64 KiB, 30 times Python's recursion limit
    assert body_problem(deep) == f"JSON nested deeper than {api.MAX_JSON_DEPTH} levels"
    ok = b"[" * api.MAX_JSON_DEPTH + b"]" * api.MAX_JSON_DEPTH
    assert isinstance(api.decode_json(ok), list)


def test_brackets_inside_strings_are_not_nesting() -> None:
    text = json.dumps({"query": "[" * 100 + '\\"{' * 50})
    assert api.json_depth(text) == 1
    assert api.decode_json(text.encode())["query"].startswith("[[[")


@pytest.mark.parametrize(
    ("content_type", "shown"),
    [("text/plain", "'text/plain'"), (None, "no Content-Type"), ("x", "'x'")],
)
def test_json_in_another_media_type_is_a_415(content_type: str | None, shown: str) -> None:
    with pytest.raises(UnsupportedMediaType) as info:
        api.decode_json(b'{"query": "q"}', content_type)
    assert info.value.status_code == 415
    assert str(info.value) == f"the body must be sent as application/json, not {shown}"


def test_json_with_a_charset_parameter_is_json() -> None:
    assert api.decode_json(b'{"a": 1}', "Application/JSON; charset=utf-8") == {"a": 1}


def service() -> SearchService:
    registry = Registry.of([FakePlatform("docs")])
    return SearchService(SqliteStore(":memory:"), NoQueue(), registry, Settings(db_path=":memory:"))


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("nul\x00byte", "query 1 contains the control character U+0000"),
        ("bell\x07", "query 1 contains the control character U+0007"),
        ("carriage\rreturn", "query 1 contains the control character U+000D"),
        ("delete\x7f", "query 1 contains the control character U+007F"),
        ("\u200b\u200b", "query 1 has no visible character"),
        ("\u0301\u00a0", "query 1 has no visible character"),
    ],
)
def test_a_query_a_person_could_not_have_typed_is_refused_and_nothing_written(
    query: str, problem: str
) -> None:
    svc = service()
    with pytest.raises(InvalidRequest) as info:
        svc.start({"query": query, "platform": "docs"})
    assert [(p.field, p.problem) for p in info.value.problems] == [("query", problem)]
    assert svc.store.recoverable() == []


@pytest.mark.parametrize("query", ["tab\there", "two\nlines", "日本語", "C++ & ∑", "ok 🙂"])
def test_tabs_newlines_and_any_script_are_fine(query: str) -> None:
    from fanfuse.models import SearchRequest

    assert SearchRequest.model_validate({"query": query}).queries == [query.strip()]
