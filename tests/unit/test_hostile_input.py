"""Hostile bodies get a specific 4xx naming the problem: deep nesting, control characters in
any string (fanfuse.inbound), invisible queries, and JSON sent as another media type
(fanfuse.api, the request model)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from fanfuse import api
from fanfuse.errors import InvalidRequest, UnsupportedMediaType
from fanfuse.inbound import CONTROL, TEXT_PATTERN, control_characters
from fanfuse.models import SearchRequest
from fanfuse.platforms import Registry
from fanfuse.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from tests.fakes import FakePlatform, NoQueue


def control(code: int) -> str:
    """The problem a string with the character `code` gets."""
    return f"contains the control character U+{code:04X}"


NUL_PROBLEM = control(0x00)


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
        ("nul\x00byte", control(0x00)),
        ("bell\x07", control(0x07)),
        ("carriage\rreturn", control(0x0D)),
        ("delete\x7f", control(0x7F)),
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
    assert SearchRequest.model_validate({"query": query}).queries == [query.strip()]


VALID = {"query": "laser", "platform": "docs"}
NUL_PROBLEM = control(0x00)


def over_http(body: dict[str, Any]) -> Any:
    """The body as both HTTP fronts hand it to the service: JSON bytes through `fanfuse.api`."""
    return api.decode_json(json.dumps(body).encode())


@pytest.mark.parametrize(
    ("fields", "field", "problem"),
    [
        ({"query": ["laser", "clear\x1b[2J"]}, "query.1", control(0x1B)),
        ({"platform": "do\x00cs"}, "platform", NUL_PROBLEM),
        ({"platform": ["docs", "we\x7fb"]}, "platform.1", control(0x7F)),
        ({"mode": "fast\x00"}, "mode", NUL_PROBLEM),
        ({"fusion": "rrf\x00"}, "fusion", NUL_PROBLEM),
        ({"language": "e\x00n"}, "language", NUL_PROBLEM),
        ({"country": "U\x0bS"}, "country", control(0x0B)),
        ({"include_domains": ["a.org", "b\x00.org"]}, "include_domains.1", NUL_PROBLEM),
        ({"exclude_domains": "a.org,b\x00.org"}, "exclude_domains", NUL_PROBLEM),
        ({"time_range": "day\x00"}, "time_range", NUL_PROBLEM),
        ({"safesearch": "off\x00"}, "safesearch", NUL_PROBLEM),
        ({"cache": "auto\x00"}, "cache", NUL_PROBLEM),
        ({"max_results": "10\x00"}, "max_results", NUL_PROBLEM),
        ({"weights": {"do\x00cs": 1}}, "weights", f"has a key that {NUL_PROBLEM}"),
        ({"weights": {"docs": "1\x00"}}, "weights.docs", NUL_PROBLEM),
        ({"weights": {"docs": {"deeper": ["\x00"]}}}, "weights.docs.deeper.0", NUL_PROBLEM),
        ({"colour\x00": "blue"}, "body", f"has a key that {NUL_PROBLEM}"),
        ({"colour": {"shade": ["dark\x1f"]}}, "colour.shade.0", control(0x1F)),
    ],
)
def test_a_control_character_in_any_string_is_a_400_naming_its_path_and_nothing_written(
    fields: dict[str, Any], field: str, problem: str
) -> None:
    svc = service()
    with pytest.raises(InvalidRequest) as info:
        svc.start(over_http({**VALID, **fields}))
    assert [(p.field, p.problem) for p in info.value.problems] == [(field, problem)]
    assert info.value.status_code == 400
    assert svc.store.recoverable() == []


def test_every_string_with_a_control_character_is_listed_at_once() -> None:
    body = {"query": ["a\x01", "b"], "country": "\x02", "weights": {"docs": "\x03", "w\x04": 1}}
    with pytest.raises(InvalidRequest) as info:
        service().start(over_http(body))
    assert str(info.value) == (
        "query.0: contains the control character U+0001; "
        "country: contains the control character U+0002; "
        "weights.docs: contains the control character U+0003; "
        "weights: has a key that contains the control character U+0004"
    )


def test_a_cancel_request_task_id_with_a_control_character_is_a_400_naming_it() -> None:
    with pytest.raises(InvalidRequest) as info:
        api.parse(api.CancelRequest, api.decode_json(b'{"task_id": "abc\\u0000"}'))
    assert [(p.field, p.problem) for p in info.value.problems] == [("task_id", NUL_PROBLEM)]


@pytest.mark.parametrize(
    "fields",
    [{"platform": "docs,\tdocs"}, {"platform": ["\ndocs"]}, {"exclude_domains": ["a.org\t"]}],
)
def test_tabs_and_newlines_are_allowed_in_other_fields_too(fields: dict[str, Any]) -> None:
    assert service().validate(over_http({**VALID, **fields})).platforms == ["docs"]


def test_a_cyclic_dict_from_the_python_api_ends_the_walk() -> None:
    """The walk stops at the API's depth bound, so a structure no JSON body can have (a
    dict that holds itself) is refused by the model, not looped over."""
    looped: dict[str, Any] = {}
    looped["docs"] = looped
    assert list(control_characters({"weights": looped})) == []
    with pytest.raises(InvalidRequest):
        service().start({**VALID, "weights": looped})


def test_the_cli_and_the_python_api_give_the_http_apis_400(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fanfuse
    from fanfuse.cli import app

    monkeypatch.setenv("FANFUSE_DB_PATH", str(tmp_path / "api.db"))
    monkeypatch.setenv("FANFUSE_DEPLOYED_PLATFORMS", '["docs"]')
    body = {"query": "laser", "country": "U\x00S", "weights": {"docs": "\x7f"}}
    expected = f"country: {NUL_PROBLEM}; weights.docs: contains the control character U+007F"
    with pytest.raises(InvalidRequest) as http:
        service().start(over_http(body))
    assert str(http.value) == expected
    with pytest.raises(InvalidRequest) as python:
        fanfuse.search(body)
    assert str(python.value) == expected
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    result = CliRunner().invoke(app, ["search", "--request", str(path)])
    assert result.exit_code == 2
    assert click.unstyle(result.stderr).strip() == f"error: {expected}"


def test_the_schema_says_the_same_for_every_free_string_and_key() -> None:
    """A schemathesis-generated body is judged by the schema: every string it leaves free and
    every map's keys carry the pattern, and the pattern is the validator's rule."""
    for code in range(0x80):
        char = chr(code)
        assert (re.fullmatch(TEXT_PATTERN, char) is None) == bool(CONTROL.search(char)), code
    schema = SearchRequest.model_json_schema()
    check = Draft202012Validator(schema)
    for bad in ({"query": "a\x00"}, {"query": ["ok", "\x1b"]}, {"query": "ok", "country": "\x7f"}):
        assert not check.is_valid(bad), bad
    assert not check.is_valid({"query": "ok", "weights": {"d\x00": 1}})
    assert check.is_valid({"query": "tab\there", "weights": {"docs": 1}, "country": "US"})
    cancel = Draft202012Validator(api.CancelRequest.model_json_schema())
    assert not cancel.is_valid({"task_id": "a\x00"})


# -- the property: any body, any control character -------------------------------------------

FORBIDDEN = frozenset(map(chr, [*range(0x20), 0x7F])) - {"\t", "\n"}
chars = st.sampled_from([*map(chr, range(0x20)), "\x7f", "a", "é", " ", ".", "日"])
texts = st.text(alphabet=chars, max_size=5) | st.sampled_from(["docs", "rrf", "US", "en", "day"])
values = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 200) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
FIELDS = ["platform", "mode", "fusion", "language", "weights", "include_domains", "country"]
bodies = st.fixed_dictionaries(
    {"query": texts | st.lists(texts, max_size=3)},
    optional={name: values for name in [*FIELDS, "cache", "max_results", "colour"]},
) | st.dictionaries(texts, values, max_size=4)


def holders(value: object, path: tuple[str, ...] = ()) -> set[str]:
    """The fields a 400 must name, by the rule as written: each string holding a forbidden
    character, at its dotted path; a key holding one, at its object's ("body" at the top)."""
    here = ".".join(path) or "body"
    if isinstance(value, str):
        return {here} if FORBIDDEN & set(value) else set()
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            found |= {here} if FORBIDDEN & set(key) else holders(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found |= holders(item, (*path, str(i)))
    return found


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies)
def test_any_body_with_a_control_character_is_a_400_naming_each_string_that_holds_one(
    body: dict[str, Any],
) -> None:
    svc = service()
    expected = holders(body)
    event("holds a forbidden character" if expected else "only allowed characters")
    try:
        svc.validate(over_http(body))
    except InvalidRequest as exc:
        named = {p.field for p in exc.problems if "control character" in p.problem}
        assert named == expected
        if expected:  # refused for that alone
            assert all("control character" in p.problem for p in exc.problems)
    else:
        assert not expected
