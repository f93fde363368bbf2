"""`GET /stats`' parameters as both fronts read them (fanfuse.http.stats_route.query_for): what the
document allows is answered, what it refuses is refused (schemathesis' negative-data check)."""

from __future__ import annotations

import pytest

from fanfuse.http import stats_route
from fanfuse.http.openapi import document
from fanfuse.wire.errors import Forbidden, InvalidRequest
from fanfuse.wire.models import Caller

OPERATOR = Caller(subject="key:ops", via="api_key")
TENANT = Caller(subject="key:team", via="api_key")


def owner_schema() -> dict[str, object]:
    parameters = document()["paths"]["/stats"]["get"]["parameters"]
    schema: dict[str, object] = next(p for p in parameters if p["name"] == "owner")["schema"]
    return schema


@pytest.mark.parametrize("caller", [OPERATOR, TENANT, None])
def test_an_owner_longer_than_the_document_allows_is_a_400_naming_it(
    caller: Caller | None,
) -> None:
    """Issue 29: an operator's `?owner=` of 201 characters was answered 200 (schemathesis,
    `--checks all` on serve: the document says maxLength 200)."""
    limit = owner_schema()["maxLength"]
    assert isinstance(limit, int)
    with pytest.raises(InvalidRequest) as refused:
        stats_route.query_for(caller, {"owner": "k" * (limit + 1)}, ["key:ops"])
    assert [p.field for p in refused.value.problems] == ["owner"]


def test_an_owner_the_document_allows_is_answered() -> None:
    longest = "k" * stats_route.MAX_PARAMETER_CHARS
    assert stats_route.query_for(OPERATOR, {"owner": longest}, ["key:ops"]).owner == longest
    with pytest.raises(Forbidden):
        stats_route.query_for(TENANT, {"owner": longest}, ["key:ops"])
