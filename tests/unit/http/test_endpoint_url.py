"""`--endpoint` as people type it: a server's base URL means its start_search route."""

from __future__ import annotations

import pytest

from fanfuse.http.client import HttpSearchClient, start_url


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/start_search"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/start_search"),
        (
            " https://us-central1-p.cloudfunctions.net ",
            "https://us-central1-p.cloudfunctions.net/start_search",
        ),
        (
            "https://abc.execute-api.us-east-1.amazonaws.com",
            "https://abc.execute-api.us-east-1.amazonaws.com/start_search",
        ),
        ("http://127.0.0.1:8000/start_search", "http://127.0.0.1:8000/start_search"),
        (
            "https://start-search-x.a.run.app/start_search",
            "https://start-search-x.a.run.app/start_search",
        ),
        (
            "http://127.0.0.1:9000/stage/start_search?x=1",
            "http://127.0.0.1:9000/stage/start_search?x=1",
        ),
    ],
)
def test_a_base_url_gets_the_start_search_route(given: str, meant: str) -> None:
    assert start_url(given) == meant
    assert HttpSearchClient(given).endpoint == meant


def test_what_is_not_a_web_url_is_left_for_the_client_to_refuse() -> None:
    assert start_url("127.0.0.1:8000") == "127.0.0.1:8000"
