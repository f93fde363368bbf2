"""`--endpoint` as people type it: a server's base URL means its start_search route."""

from __future__ import annotations

import pytest

from fanfuse.http.client import HttpSearchClient, start_url, status_url


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


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/search_status/t1"),
        ("http://127.0.0.1:8000/start_search", "http://127.0.0.1:8000/search_status/t1"),
        ("http://127.0.0.1:8000/search_status/", "http://127.0.0.1:8000/search_status/t1"),
        (
            "https://us-central1-p.cloudfunctions.net/",
            "https://us-central1-p.cloudfunctions.net/search_status/t1",
        ),
        (
            "http://127.0.0.1:9000/stage/start_search?x=1",
            "http://127.0.0.1:9000/stage/search_status/t1",
        ),
        (  # a function of its own reads the task id from the last segment
            "https://search-status-x.a.run.app",
            "https://search-status-x.a.run.app/search_status/t1",
        ),
    ],
)
def test_a_search_s_status_url_from_the_endpoint_and_its_id(given: str, meant: str) -> None:
    """`fanfuse trace --endpoint`: the status_url the API would have given (`{search_status
    URL}/{task_id}`), for a search this client did not start."""
    assert status_url(given, "t1") == meant


def test_a_task_id_is_one_path_segment_whatever_it_holds() -> None:
    assert status_url("http://127.0.0.1:8000", "../a b?c") == (
        "http://127.0.0.1:8000/search_status/..%2Fa%20b%3Fc"
    )
