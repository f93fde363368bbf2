"""The request's options: validation (one problem per bad field) and the post-filters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fanfuse.platforms import Registry
from fanfuse.rules.filters import host_of, post_filter
from fanfuse.service.service import SearchService
from fanfuse.settings import Settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.errors import InvalidRequest
from fanfuse.wire.models import Hit
from fanfuse.wire.options import Applied, OptionName, SearchOptions, TimeRange
from fanfuse.wire.request import SearchRequest
from tests.support.fakes import FakePlatform, NoQueue

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
CONTEXT = {"available": ["docs"], "deadline_seconds": 120.0}


def parse(**fields: Any) -> SearchRequest:
    return SearchRequest.model_validate({"query": "q", **fields}, context=CONTEXT)


def test_options_are_normalized() -> None:
    request = parse(
        include_domains=["Example.ORG.", "news.example.org", "example.org", "münchen.de"],
        exclude_domains="ads.example.org",
        time_range="week",
        country="de",
        safesearch="strict",
        timeout_s=2,
        cache="bypass",
    )
    assert request.include_domains == ["example.org", "news.example.org", "xn--mnchen-3ya.de"]
    assert request.exclude_domains == ["ads.example.org"]
    assert request.country == "DE"
    assert request.timeout_s == 2.0
    assert request.options.given() == set(OptionName)
    assert request.cache.value == "bypass"


def test_defaults_set_no_option() -> None:
    request = parse()
    assert request.options.given() == frozenset()
    assert request.cache.value == "auto" and request.timeout_s is None


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"include_domains": ["https://example.org"]}, "include_domains", "scheme"),
        ({"include_domains": ["example.org/news"]}, "include_domains", "path"),
        ({"exclude_domains": ["example.org:8080"]}, "exclude_domains", "port"),
        ({"include_domains": ["exa mple.org"]}, "include_domains", "not a host name"),
        ({"include_domains": ["-bad.org"]}, "include_domains", "not a host name"),
        ({"include_domains": [f"d{i}.org" for i in range(21)]}, "include_domains", "at most 20"),
        ({"include_domains": [3]}, "include_domains", "strings"),
        ({"include_domains": {"a": 1}}, "include_domains", "list of host names"),
        (
            {"include_domains": ["a.org"], "exclude_domains": ["A.org"]},
            "exclude_domains",
            "both included and excluded",
        ),
        ({"time_range": "fortnight"}, "time_range", "'day', 'week', 'month' or 'year'"),
        ({"country": "XX"}, "country", "ISO 3166-1 alpha-2"),
        ({"country": "USA"}, "country", "ISO 3166-1 alpha-2"),
        ({"safesearch": "on"}, "safesearch", "'off', 'moderate' or 'strict'"),
        ({"timeout_s": 0.2}, "timeout_s", "at least 0.5"),
        ({"timeout_s": float("nan")}, "timeout_s", "at least 0.5"),
        ({"timeout_s": 121}, "timeout_s", "deadline, 120 seconds"),
        ({"timeout_s": "soon"}, "timeout_s", "number"),
        ({"cache": "never"}, "cache", "'auto', 'bypass' or 'only'"),
    ],
)
def test_bad_options_name_the_field(fields: dict[str, Any], field: str, words: str) -> None:
    store = SqliteStore(":memory:")
    service = SearchService(
        store, NoQueue(), Registry.of([FakePlatform("docs")]), Settings(deadline_seconds=120)
    )
    with pytest.raises(InvalidRequest) as info:
        service.start({"query": "q", **fields})
    assert store.recoverable() == []  # nothing written
    problems = {p.field: p.problem for p in info.value.problems}
    assert list(problems) == [field]
    assert words in problems[field]


def _hit(url: str, days_old: float | None = None) -> Hit:
    published = NOW - timedelta(days=days_old) if days_old is not None else None
    return Hit(url=url, title=url, published_at=published)


def test_domains_match_exactly_with_subdomains() -> None:
    lists = [
        [
            _hit("https://example.org/a"),
            _hit("https://news.example.org/b"),
            _hit("https://notexample.org/c"),
            _hit("https://example.org.evil.com/d"),
            _hit("https://ads.example.org/e"),
        ]
    ]
    options = SearchOptions(include_domains=["example.org"], exclude_domains=["ads.example.org"])
    out = post_filter(lists, options, frozenset(), NOW)
    assert [h.url for h in out.lists[0]] == [
        "https://example.org/a",
        "https://news.example.org/b",
    ]
    assert out.uses["include_domains"].applied is Applied.POST_FILTER
    assert out.uses["include_domains"].removed == 2
    assert out.uses["exclude_domains"].removed == 1


def test_native_domains_are_still_enforced_and_leaks_counted() -> None:
    lists = [[_hit("https://example.org/a"), _hit("https://other.net/leak")]]
    native = frozenset({OptionName.INCLUDE_DOMAINS})
    out = post_filter(lists, SearchOptions(include_domains=["example.org"]), native, NOW)
    assert [h.url for h in out.lists[0]] == ["https://example.org/a"]
    assert out.uses["include_domains"].applied is Applied.NATIVE
    assert out.uses["include_domains"].removed == 1


def test_time_range_filters_dated_results_only_and_not_when_native() -> None:
    lists = [[_hit("https://a/1", 2), _hit("https://a/2", 10), _hit("https://a/3", None)]]
    options = SearchOptions(time_range=TimeRange.WEEK)
    out = post_filter(lists, options, frozenset(), NOW)
    assert [h.url for h in out.lists[0]] == ["https://a/1", "https://a/3"]
    assert out.uses["time_range"].removed == 1
    native = post_filter(lists, options, frozenset({OptionName.TIME_RANGE}), NOW)
    assert len(native.lists[0]) == 3
    assert native.uses["time_range"].applied is Applied.NATIVE


def test_naive_dates_are_read_as_utc() -> None:
    old = Hit(url="https://a/1", published_at=datetime(2026, 1, 1))
    out = post_filter([[old]], SearchOptions(time_range=TimeRange.DAY), frozenset(), NOW)
    assert out.lists == [[]]


def test_country_and_safesearch_cannot_be_post_filtered() -> None:
    options = SearchOptions(country="DE", safesearch="strict")
    out = post_filter([[_hit("https://a/1")]], options, frozenset({OptionName.COUNTRY}), NOW)
    assert out.uses["country"].applied is Applied.NATIVE
    assert out.uses["safesearch"].applied is Applied.NOT_APPLIED
    assert len(out.lists[0]) == 1


def test_counts_add_up_across_queries_and_filters() -> None:
    lists = [
        [_hit("https://x.org/1", 40), _hit("https://y.org/1", 1)],
        [_hit("https://y.org/2", 40), _hit("https://z.org/2", 1)],
    ]
    options = SearchOptions(exclude_domains=["z.org"], time_range=TimeRange.MONTH)
    out = post_filter(lists, options, frozenset(), NOW)
    assert [[h.url for h in hits] for hits in out.lists] == [["https://y.org/1"], []]
    removed = sum(u.removed for u in out.uses.values())
    assert removed == 3
    assert out.uses["exclude_domains"].removed == 1  # z.org/2 counted once, by the first filter


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://WWW.Example.org:8443/x", "www.example.org"),
        ("https://bücher.de/x", "xn--bcher-kva.de"),
        ("fanfuse://vaswani/12", "vaswani"),
        ("not a url", None),
        ("http://[::1", None),
    ],
)
def test_host_of(url: str, host: str | None) -> None:
    assert host_of(url) == host
