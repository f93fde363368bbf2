"""Hostile bodies get a specific 4xx naming the problem: deep nesting, control characters in
any string (fanfuse.wire.inbound), invisible queries, and JSON sent as another media type
(fanfuse.http.api, the request model)."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import flask
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from fanfuse.auth import keys
from fanfuse.auth.callers import Authenticator
from fanfuse.fronts import functions as front
from fanfuse.http import api
from fanfuse.platforms import Registry
from fanfuse.runtimes import cloud
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.errors import InvalidRequest, Unauthorized, UnsupportedMediaType
from fanfuse.wire.inbound import MAX_JSON_DEPTH, TEXT_PATTERN, bad_characters, character_problem
from fanfuse.wire.models import Problem, SearchRequest, utcnow
from tests.support.fakes import FakePlatform, HeldQueue, NoQueue


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
    assert body_problem(deep) == f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    ok = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH

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
        ("\u0301\u00a0", "query 1 has no visible character"),
        ("\u00ad\u00ad", "query 1 has no visible character"),
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
    """The body as both HTTP fronts hand it to the service: JSON bytes through
    `fanfuse.http.api`."""
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
    assert list(bad_characters({"weights": looped})) == []
    with pytest.raises(InvalidRequest):
        service().start({**VALID, "weights": looped})


def test_the_cli_and_the_python_api_give_the_http_apis_400(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fanfuse
    from fanfuse.cli.main import app

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
    for code in range(0x10000):  # the joiners aside, which only the API judges (by context)
        char = chr(code)
        if char not in "\u200c\u200d":
            refused = character_problem(f"a{char}a") is not None
            assert (re.fullmatch(TEXT_PATTERN, f"a{char}a") is None) == refused, hex(code)
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


# -- issue 19: characters that read otherwise than they are ---------------------------------


@pytest.mark.parametrize(
    ("char", "kind"),
    [
        *[(chr(c), "control character") for c in (0x80, 0x85, 0x9B, 0x9F)],
        *[
            (chr(c), "bidi control")
            for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
        ],
        *[(chr(c), "zero-width character") for c in (0x200B, 0x2060, 0xFEFF)],
    ],
)
def test_c1_bidi_and_zero_width_characters_in_a_query_are_a_400_naming_the_code_point(
    char: str, kind: str
) -> None:
    svc = service()
    for query, field in ((f"laser{char}gun", "query"), (["ok", f"a{char}b"], "query.1")):
        with pytest.raises(InvalidRequest) as info:
            svc.start(over_http({"query": query, "platform": "docs"}))
        problem = f"contains the {kind} U+{ord(char):04X}"
        assert [(p.field, p.problem) for p in info.value.problems] == [(field, problem)]
    assert svc.store.recoverable() == []


def test_the_rule_holds_for_every_string_not_the_queries_alone() -> None:
    body = {"query": "q", "country": "U\u202eS", "weights": {"docs\u200b": 1}}
    with pytest.raises(InvalidRequest) as info:
        service().start(over_http(body))
    assert [(p.field, p.problem) for p in info.value.problems] == [
        ("country", "contains the bidi control U+202E"),
        ("weights", "has a key that contains the zero-width character U+200B"),
    ]


@pytest.mark.parametrize(
    "query",
    [
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian: ZWNJ inside a word
        "\u0915\u094d\u200d\u0937",  # Devanagari: a virama, then ZWJ (a half form)
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # a family: an emoji ZWJ sequence
        "\U0001f469\U0001f3fd\u200d\U0001f4bb",  # a skin tone, then ZWJ
        "\U0001f3f3\ufe0f\u200d\U0001f308",  # the emoji presentation selector, then ZWJ
    ],
)
def test_joiners_that_join_a_script_or_an_emoji_sequence_are_kept(query: str) -> None:
    assert service().validate(over_http({"query": query, "platform": "docs"})).queries == [query]


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("la\u200dser", "U+200D"),  # between Latin letters: it only hides something
        ("laser\u200c", "U+200C"),  # at an edge
        ("\u200claser", "U+200C"),
        ("\u0645\u200c\u200c\u062e", "U+200C"),  # doubled
        ("\u0645\u200c x", "U+200C"),  # before a space
    ],
)
def test_joiners_elsewhere_are_refused_with_the_code_point(query: str, code: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        service().validate(over_http({"query": query, "platform": "docs"}))
    (problem,) = info.value.problems
    assert problem.field == "query"
    assert problem.problem.startswith(f"contains the zero-width character {code} (a joiner")


def test_the_schema_refuses_c1_bidi_and_zero_width_too() -> None:
    check = Draft202012Validator(SearchRequest.model_json_schema())
    for char in ("\x85", "\u202e", "\u2067", "\u200f", "\u061c", "\u200b", "\ufeff", "\u2060"):
        assert not check.is_valid({"query": f"a{char}b"}), hex(ord(char))
        assert not check.is_valid({"query": "ok", "weights": {f"d{char}": 1}}), hex(ord(char))
    assert check.is_valid({"query": "\u0645\u06cc\u200c\u062e"})  # the API judges joiners


# -- strict numbers and booleans ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"max_results": True}, "max_results"),
        ({"max_results": "10"}, "max_results"),
        ({"max_results": 10.5}, "max_results"),
        ({"include_content": 1}, "include_content"),
        ({"include_content": "true"}, "include_content"),
        ({"timeout_s": True}, "timeout_s"),
        ({"timeout_s": "5"}, "timeout_s"),
        ({"weights": {"docs": True}}, "weights.docs"),
        ({"weights": {"docs": "1"}}, "weights.docs"),
    ],
)
def test_numbers_and_booleans_are_strict(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        service().start(over_http({**VALID, **fields}))
    assert [p.field for p in info.value.problems] == [field]
    assert info.value.status_code == 400


def test_what_the_cli_the_mcp_tools_and_the_python_api_send_is_still_accepted() -> None:
    request = service().validate(
        over_http(
            {**VALID, "max_results": 7, "include_content": True, "timeout_s": 3, "weights": {}}
        )
    )
    assert (request.max_results, request.include_content, request.timeout_s) == (7, True, 3.0)
    assert service().validate({**VALID, "timeout_s": 2.5, "weights": {"docs": 2}}).weights == {
        "docs": 2.0
    }
    again = service().validate(request)  # a SearchRequest itself, as the Python API passes it
    assert again.max_results == 7 and again.include_content is True
    # JSON Schema's `integer` is any number without a fraction: 7.0 is seven (schemathesis)
    assert service().validate(over_http({**VALID, "max_results": 7.0})).max_results == 7


# -- sizes: linear, capped, every malformed input a 4xx --------------------------------------


def names_body(count: int) -> bytes:
    """`platform` as `count` distinct three-letter names, comma-separated (16,000: 64 KB)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    names = [a + b + c for a in letters for b in letters for c in letters][:count]
    return json.dumps({"query": "q", "platform": ",".join(names)}).encode()


def test_a_5000_digit_integer_is_a_400_naming_the_body() -> None:
    raw = b'{"query": "q", "max_results": ' + b"9" * 5000 + b"}"
    assert body_problem(raw) == "a number has more than 4300 digits"


@pytest.mark.parametrize(
    ("platform", "count"),
    [(",".join(["docs"] * 65), 65), (["docs"] * 65, 65), (["docs,docs"] * 33, 66)],
)
def test_more_than_64_platform_names_is_a_400_naming_platform_and_the_count(
    platform: str | list[str], count: int
) -> None:
    """Counted before duplicates are dropped: the cap bounds the work, not the selection."""
    with pytest.raises(InvalidRequest) as info:
        service().validate({"query": "q", "platform": platform})
    assert [(p.field, p.problem) for p in info.value.problems] == [
        ("platform", f"at most 64 platform names per request, got {count}")
    ]
    ok = service().validate({"query": "q", "platform": ",".join(["Docs "] * 64)})
    assert ok.platforms == ["docs"]  # duplicates dropped, the names normalised


def test_long_names_hosts_and_values_are_refused_without_echoing_them_whole() -> None:
    long = "x" * 60_000
    for fields, field in (
        ({"platform": long}, "platform"),
        ({"include_domains": [long]}, "include_domains"),
        ({"country": long}, "country"),
        ({"weights": {long: 1}}, "weights"),
    ):
        with pytest.raises(InvalidRequest) as info:
            service().validate({**VALID, **fields})
        (problem,) = info.value.problems
        assert problem.field == field and len(problem.problem) < 200, problem
    with pytest.raises(InvalidRequest) as info:
        service().validate({**VALID, "weights": {f"w{i}": 1 for i in range(65)}})
    assert str(info.value) == "weights: at most 64 weights, got 65"


def test_a_body_of_thousands_of_problems_lists_50_and_counts_the_rest() -> None:
    body = {"query": "q", **{f"field{i}": 1 for i in range(3000)}}
    with pytest.raises(InvalidRequest) as info:
        service().validate(over_http(body))
    problems = info.value.problems
    assert len(problems) == 51 and problems[0] == Problem(field="field0", problem="unknown field")
    assert problems[-1] == Problem(field="body", problem="and 2950 more problems not listed")
    bad = {"query": "q", "colour": ["\x00"] * 5000}
    with pytest.raises(InvalidRequest) as info:
        service().validate(over_http(bad))
    assert len(info.value.problems) == 51  # refused for the characters before the fields
    assert info.value.problems[-1] == Problem(
        field="body", problem="and more such strings, not listed"
    )


def cpu_seconds(work: Callable[[], object], repeat: int = 10) -> float:
    """This thread's CPU time for `work`, per run (of `repeat`). `thread_time` counts the
    cycles the thread ran, not the time it waited for a core: a busy machine (these are
    shared) stretches the wall clock of a run many times over, and its CPU time hardly."""
    start = time.thread_time()
    for _ in range(repeat):
        work()
    return (time.thread_time() - start) / repeat


def test_validation_is_linear_in_the_body() -> None:
    """A 64 KB body of names costs at most twice as much per byte as an 8 KB one (the
    quadratic dedup made it 64 times: 0.9 s against 15 ms). Costs are this thread's CPU time,
    the two sizes measured in turn, the least of 5 rounds each: neither the machine's load nor
    a slower stretch of the run favours one size (wall-clock ratios failed under load)."""
    svc = service()
    svc.validate({"query": "q"})  # the platforms' availability read once, outside the timing

    def refuse(raw: bytes) -> Callable[[], object]:
        def work() -> object:
            with pytest.raises(InvalidRequest):
                svc.validate(api.decode_json(raw))
            return None

        return work

    small, large = names_body(2_000), names_body(16_000)
    assert len(large) > 60_000 and len(large) / len(small) > 7.5
    rounds = [(cpu_seconds(refuse(small)), cpu_seconds(refuse(large))) for _ in range(5)]
    ratio = min(r[1] for r in rounds) / min(r[0] for r in rounds)
    assert ratio < 2 * len(large) / len(small), ratio


def test_json_depth_is_the_parsers_view_in_c() -> None:
    """The bracket count that guards the parser: strings (with escapes) and an unterminated
    string's tail are not nesting; unbalanced closers do not go below zero."""
    assert api.json_depth('{"a": [1, {"b": "]]]{{{"}], "c": "\\\\"}') == 3
    assert api.json_depth('["[\\"[", [[]]]') == 3
    assert api.json_depth('{"a": "[[[[') == 1
    assert api.json_depth("]]][[") == 0
    assert api.json_depth("") == 0


def test_max_content_chars_has_a_default() -> None:
    assert Settings(db_path=":memory:").max_content_chars == 20_000


# -- the functions' front (cloud.py through Flask): 400, 401, and a token per attempt --------


def nested_token(depth: int = 1500) -> str:
    """A JWT-shaped token whose header and payload are `depth` nested `[`: `json.loads` in the
    token decoder recurses past Python's limit on it."""
    part = base64.urlsafe_b64encode(b"[" * depth).rstrip(b"=").decode()
    return f"{part}.{part}.c2ln"


@pytest.fixture
def functions() -> Iterator[SearchService]:
    """cloud.py's process state on a real service: SQLite, the `docs` double, no queue (a
    refused request enqueues nothing), ID tokens accepted, a task service account set."""
    settings = Settings(
        db_path=":memory:",
        id_token_audiences=["https://fanfuse.example"],
        tasks_service_account="tasks@p.iam.gserviceaccount.com",
    )
    registry = Registry.of([FakePlatform("docs")])
    svc = SearchService(SqliteStore(":memory:"), NoQueue(), registry, settings)
    cloud._settings, cloud._service, cloud._authenticator = settings, svc, None
    yield svc
    cloud._settings, cloud._service, cloud._authenticator = None, None, None


def to_function(
    target: Callable[[flask.Request], flask.Response],
    data: bytes,
    headers: dict[str, str],
    path: str = "/",
) -> flask.Response:
    app = flask.Flask("hostile")
    with app.test_request_context(
        path, method="POST", data=data, content_type="application/json", headers=headers
    ):
        return target(flask.request)


def a_key(svc: SearchService, rate_per_minute: int | None = None) -> dict[str, str]:
    plaintext, record = keys.new_key("mallory", "", rate_per_minute, None, utcnow())
    svc.store.put_key(record)
    return {keys.API_KEY_HEADER: plaintext}


def test_the_functions_answer_a_5000_digit_integer_with_a_400(functions: SearchService) -> None:
    raw = b'{"query": "q", "max_results": ' + b"9" * 5000 + b"}"
    answer = to_function(front.start_search, raw, a_key(functions))
    assert answer.status_code == 400, answer.get_json()
    assert answer.get_json()["problems"] == [
        {"field": "body", "problem": "a number has more than 4300 digits"}
    ]


def test_the_functions_answer_an_undecodable_token_with_a_401(functions: SearchService) -> None:
    bearer = {"Authorization": f"Bearer {nested_token()}"}
    for target in (front.start_search, front.cancel_search):
        answer = to_function(target, b'{"query": "q"}', bearer)
        assert answer.status_code == 401, answer.get_json()
        assert answer.get_json()["message"] == "ID token refused: it is not a well-formed JWT"
    delivery = to_function(
        front.run_platform, b'{"task_id": "t", "platform": "docs"}', {**bearer, "Host": "h"}
    )
    assert delivery.status_code == 401, delivery.get_json()
    assert "not a well-formed JWT" in delivery.get_json()["message"]


def test_an_undecodable_gateway_header_is_a_401(store: SqliteStore) -> None:
    auth = Authenticator(Settings(db_path=":memory:", trust_gateway=True), store)
    deep = base64.urlsafe_b64encode(b"[" * 1500).decode()
    with pytest.raises(Unauthorized):
        auth.caller({"X-Apigateway-Api-Userinfo": deep})


def test_an_invalid_body_spends_a_token_at_the_functions(functions: SearchService) -> None:
    """A key of 2 starts a minute: the third request is a 429 though all three are invalid."""
    key = a_key(functions, rate_per_minute=2)
    statuses = [
        to_function(front.start_search, raw, key).status_code
        for raw in (b'{"query": 1}', b'{"query": "q", "max_results": true}', b"{")
    ]
    assert statuses == [400, 400, 429]
    assert functions.store.recoverable() == []  # nothing written


def test_a_valid_start_spends_one_token_not_two(functions: SearchService) -> None:
    """Admitted once before the body is read, not again in `start`: a key of 3 a minute gets
    a 400 and two starts (held in the queue), then a 429."""
    functions.queue = HeldQueue()
    key = a_key(functions, rate_per_minute=3)
    bodies = (b'{"query": 1}', b'{"query": "q"}', b'{"query": "q"}', b'{"query": "q"}')
    statuses = [to_function(front.start_search, raw, key).status_code for raw in bodies]
    assert statuses == [400, 202, 202, 429]
