"""fanfuse.http.cors: which origin's page may call the public targets across origins."""

from __future__ import annotations

import pytest

from fanfuse.http import cors
from fanfuse.settings import Settings

PAGE = "http://127.0.0.1:8100"


def test_no_origin_is_allowed_by_default() -> None:
    assert Settings().cors_origins == []
    assert cors.answer_headers(PAGE, []) == {}
    assert cors.preflight_headers(PAGE, [], ("POST",)) is None


def test_a_listed_origin_gets_its_own_name_back_never_a_wildcard() -> None:
    answer = cors.answer_headers(PAGE, [PAGE + "/"])
    assert answer["Access-Control-Allow-Origin"] == PAGE
    assert answer["Vary"] == "Origin"
    assert "Retry-After" in answer["Access-Control-Expose-Headers"]
    assert "Access-Control-Allow-Credentials" not in answer
    preflight = cors.preflight_headers(PAGE, [PAGE], ("GET", "HEAD"))
    assert preflight is not None
    assert preflight["Access-Control-Allow-Methods"] == "GET, HEAD"
    assert "X-Api-Key" in preflight["Access-Control-Allow-Headers"]


def test_an_origin_not_listed_gets_no_cors_header_only_vary() -> None:
    for stranger in ("http://127.0.0.1:8101", "http://127.0.0.1", "null", "", None):
        assert cors.answer_headers(stranger, [PAGE]) == {"Vary": "Origin"}, stranger
        assert cors.preflight_headers(stranger, [PAGE], ("POST",)) is None


def test_the_setting_reads_a_json_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FANFUSE_CORS_ORIGINS", f'["{PAGE}"]')
    assert Settings().cors_origins == [PAGE]
