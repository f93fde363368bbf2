"""The request model: the only way in, with one clear problem per bad field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from fanfuse.platforms import Registry
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.errors import InvalidRequest
from fanfuse.wire.models import SearchRequest
from tests.support.fakes import FakePlatform, NoQueue

AVAILABLE = ["docs", "vectors", "google"]


def parse(**fields: Any) -> SearchRequest:
    return SearchRequest.model_validate(fields, context={"available": AVAILABLE})


def problem(**fields: Any) -> str:
    with pytest.raises(ValidationError) as info:
        parse(**fields)
    return str(info.value)


@pytest.mark.parametrize(
    ("platform", "expected"),
    [
        ("all", AVAILABLE),
        ("docs", ["docs"]),
        ("docs,vectors", ["docs", "vectors"]),
        ("docs, vectors", ["docs", "vectors"]),
        ("  Docs ,  VECTORS  ", ["docs", "vectors"]),
        (["google", "docs"], ["google", "docs"]),
        ("docs,docs", ["docs"]),
        ("ALL", AVAILABLE),
    ],
)
def test_platform_selection(platform: Any, expected: list[str]) -> None:
    assert parse(query="q", platform=platform).platforms == expected


def test_platform_defaults_to_all() -> None:
    assert parse(query="q").platforms == AVAILABLE


def test_unknown_platform_lists_available() -> None:
    msg = problem(query="q", platform="docs, bing")
    assert "unknown platform 'bing'" in msg
    assert "available: docs, vectors, google" in msg


@pytest.mark.parametrize("platform", ["", " , ", []])
def test_empty_selection(platform: Any) -> None:
    assert "platform selection is empty" in problem(query="q", platform=platform)


def test_all_with_names_is_ambiguous() -> None:
    assert '"all" cannot be combined' in problem(query="q", platform="all, docs")


def test_queries_normalized() -> None:
    assert parse(query="  hello  ").queries == ["hello"]
    assert parse(query=["a", " b "]).queries == ["a", "b"]


def test_more_than_five_queries() -> None:
    assert "at most 5 queries per request, got 6" in problem(query=[str(i) for i in range(6)])


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("   ", "query 1 is empty"),
        ([], "query must not be empty"),
        (["ok", ""], "query 2 is empty"),
        ("x" * 501, "at most 500"),
        (5, "query must be a string or a list of strings"),
        ([1], "query 1 must be a string"),
    ],
)
def test_bad_queries(query: Any, text: str) -> None:
    assert text in problem(query=query)


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_results", 0), ("max_results", 101), ("fusion", "borda"), ("language", "english!")],
)
def test_bad_fields(field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as info:
        parse(query="q", **{field: value})
    assert info.value.errors()[0]["loc"] == (field,)


def test_unknown_fields_rejected() -> None:
    assert "Extra inputs are not permitted" in problem(query="q", colour="blue")


def test_weights_must_name_platforms_available_here() -> None:
    """A typo is a 400; a weight for an available platform the search does not run is unused
    (`all`, the default, is the server's choice: a client cannot know which it leaves out)."""
    assert parse(query="q", platform="docs", weights={" Docs": 2}).weights == {"docs": 2}
    assert parse(query="q", platform="docs", weights={"vectors": 1}).weights == {"vectors": 1}
    assert parse(query="q", mode="fast", weights={n: 1.0 for n in AVAILABLE}).weights
    for key in ("", "doc", "bing"):
        assert "weights name platforms not available here" in problem(
            query="q", platform="docs", weights={key: 1}
        )


def test_service_lists_every_problem_and_writes_nothing(settings: Settings) -> None:
    store = SqliteStore(settings.db_path)
    service = SearchService(store, NoQueue(), Registry.of([FakePlatform("docs")]), settings)
    with pytest.raises(InvalidRequest) as info:
        service.start({"query": [], "platform": "nope", "max_results": 0, "extra": 1})
    fields = {p.field: p.problem for p in info.value.problems}
    assert set(fields) == {"query", "platform", "max_results", "extra"}
    assert fields["extra"] == "unknown field"
    assert "available: docs" in fields["platform"]
    assert store.recoverable() == []
    with pytest.raises(InvalidRequest) as info:
        service.start(["not", "an", "object"])
    assert info.value.problems[0].field == "body"


def test_known_but_unconfigured_platform_says_why(settings: Settings) -> None:
    class NeedsKey(FakePlatform):
        def availability(self) -> str | None:
            return "missing or invalid settings: FANFUSE_GOOGLE_API_KEY"

    registry = Registry.of([FakePlatform("docs"), NeedsKey("google")])
    service = SearchService(SqliteStore(settings.db_path), NoQueue(), registry, settings)
    with pytest.raises(InvalidRequest) as info:
        service.start({"query": "q", "platform": "google"})
    assert "FANFUSE_GOOGLE_API_KEY" in str(info.value)
