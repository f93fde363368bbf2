"""Clean and canonical URLs, dedup keeping every source, hand-computed RRF, concat.

The merge rules and near duplicates in detail: test_dedup.py.
"""

from __future__ import annotations

import pytest

from fanfuse.fusion.fuse import canonical_url, clean_url, content_id, fuse, fuse_queries
from fanfuse.wire.models import FusionMethod, Hit
from tests.support.fakes import hits


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        ("HTTP://Example.COM/Path", "http://example.com/Path"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("https://example.com/a/b/", "https://example.com/a/b/"),  # as served
        ("https://example.com/", "https://example.com/"),
        ("https://example.com", "https://example.com/"),
        ("https://example.com/a#section-2", "https://example.com/a"),
        ("https://example.com/a?utm_source=x&utm_MEDIUM=y&id=3", "https://example.com/a?id=3"),
        ("https://example.com/a?gclid=1&fbclid=2&msclkid=3&q=z", "https://example.com/a?q=z"),
        ("https://example.com/a?b=2&a=1", "https://example.com/a?a=1&b=2"),
        ("https://example.com/a?flag=&a=1", "https://example.com/a?a=1&flag="),
        ("https://www.example.com/a", "https://www.example.com/a"),
        ("https://example.com/a%7eb", "https://example.com/a~b"),
        ("https://example.com/a/./b/../c", "https://example.com/a/c"),
    ],
)
def test_clean_url(url: str, clean: str) -> None:
    assert clean_url(url) == clean


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("HTTP://Example.COM/Path", "https://example.com/Path"),
        ("http://example.com:80/a", "https://example.com/a"),
        ("http://example.com:8080/a", "https://example.com:8080/a"),
        ("https://example.com/a/b/", "https://example.com/a/b"),
        ("https://example.com/", "https://example.com/"),
        ("https://www.example.org/a", "https://example.org/a"),
        ("http://WWW.Example.ORG/a/?utm_source=x#top", "https://example.org/a"),
        ("https://m.example.org/a", "https://example.org/a"),
        ("https://www.m.example.org/a", "https://m.example.org/a"),  # one label only
        ("https://en.m.wikipedia.org/wiki/X", "https://en.m.wikipedia.org/wiki/X"),  # not leading
        ("https://www2.example.org/a", "https://www2.example.org/a"),
        ("https://www.co.uk/a", "https://www.co.uk/a"),  # co.uk is a public suffix
        ("https://user@www.example.org/a", "https://user@example.org/a"),
        ("http://127.0.0.1:5000/a", "https://127.0.0.1:5000/a"),
        ("ftp://www.example.org/a", "ftp://www.example.org/a"),
    ],
)
def test_canonical_url_folds_scheme_and_www(url: str, canonical: str) -> None:
    assert canonical_url(url) == canonical


def test_one_page_one_content_id_whatever_the_spelling() -> None:
    ids = {
        content_id(u)
        for u in ("http://www.x.org/a", "https://x.org/a?utm_source=z", "https://m.x.org/a/")
    }
    assert len(ids) == 1
    assert content_id("https://x.org/b") not in ids


def _h(url: str, rank: int, title: str = "t", snippet: str = "s", **kw: object) -> Hit:
    return Hit(url=url, rank=rank, title=title, snippet=snippet, **kw)


def test_duplicates_merge_and_keep_every_source() -> None:
    a = [
        _h("https://x.org/1?utm_source=a", 1, title="short", snippet="a long snippet here"),
        _h("https://x.org/2", 2),
    ]
    b = [_h("HTTPS://X.ORG/1/#top", 1, title="a much longer title", snippet="tiny")]
    results = fuse({"alpha": a, "beta": b}, FusionMethod.RRF, 10)
    assert len(results) == 2
    top = results[0]
    assert top.platform == "alpha"
    assert top.platforms == ["alpha", "beta"]
    assert top.ranks == {"alpha": 1, "beta": 1}
    assert top.title == "a much longer title"  # one vote each: the longer title wins the tie
    assert top.snippet == "a long snippet here"
    assert top.url == "https://x.org/1"  # the clean form, never the tracking one
    assert [(v.url, v.platforms) for v in top.variants] == [
        ("https://x.org/1?utm_source=a", ["alpha"]),
        ("HTTPS://X.ORG/1/#top", ["beta"]),
    ]
    assert top.metadata["canonical_url"] == "https://x.org/1"
    assert "near_duplicates" not in top.metadata
    assert [r.rank for r in results] == [1, 2]


def test_rrf_scores_hand_computed() -> None:
    a = [_h("https://u/1", 1), _h("https://u/2", 2), _h("https://u/3", 3)]
    b = [_h("https://u/2", 1), _h("https://u/4", 2)]
    results = fuse({"a": a, "b": b}, FusionMethod.RRF, 10)
    scores = {r.url: r.score for r in results}
    assert [r.url for r in results] == ["https://u/2", "https://u/1", "https://u/4", "https://u/3"]
    assert scores["https://u/2"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["https://u/1"] == pytest.approx(1 / 61)
    assert scores["https://u/4"] == pytest.approx(1 / 62)
    assert scores["https://u/3"] == pytest.approx(1 / 63)


def test_weighted_rrf_hand_computed() -> None:
    a = [_h("https://u/1", 1), _h("https://u/2", 2)]
    b = [_h("https://u/3", 1), _h("https://u/2", 2)]
    results = fuse({"a": a, "b": b}, FusionMethod.RRF, 10, weights={"a": 2.0, "b": 0.5})
    scores = {r.url: r.score for r in results}
    assert scores["https://u/1"] == pytest.approx(2 / 61)
    assert scores["https://u/2"] == pytest.approx(2 / 62 + 0.5 / 62)
    assert scores["https://u/3"] == pytest.approx(0.5 / 61)
    assert [r.url for r in results] == ["https://u/2", "https://u/1", "https://u/3"]


def test_limit_applies_after_fusion() -> None:
    results = fuse({"a": _ranked(hits("a", 8)), "b": _ranked(hits("b", 8))}, FusionMethod.RRF, 5)
    assert len(results) == 5


def _ranked(items: list[Hit]) -> list[Hit]:
    return [h.model_copy(update={"rank": i}) for i, h in enumerate(items, 1)]


@pytest.mark.parametrize(("limit", "split"), [(30, (15, 15)), (31, (15, 16)), (10, (5, 5))])
def test_concat_quotas(limit: int, split: tuple[int, int]) -> None:
    lists = {"a": _ranked(hits("a", 40)), "b": _ranked(hits("b", 40))}
    results = fuse(lists, FusionMethod.CONCAT, limit)
    counts = (
        sum(r.platform == "a" for r in results),
        sum(r.platform == "b" for r in results),
    )
    assert counts == split
    assert [r.platform for r in results] == ["a"] * split[0] + ["b"] * split[1]


def test_concat_keeps_first_occurrence() -> None:
    shared = "https://example.com/shared"
    a = _ranked([*hits("a", 2), Hit(url=shared, title="from a")])
    b = _ranked([Hit(url=shared, title="from b, longer"), *hits("b", 3)])
    results = fuse({"a": a, "b": b}, FusionMethod.CONCAT, 6)
    urls = [r.url for r in results]
    assert urls.count(shared) == 1
    assert results[urls.index(shared)].platform == "a"
    assert results[urls.index(shared)].platforms == ["a", "b"]
    assert len(results) == 6


def test_several_queries_fuse_per_query_and_overall() -> None:
    a = [
        _h("https://u/1", 1, query_index=0),
        _h("https://u/2", 1, query_index=1),
        _h("https://u/3", 2, query_index=1),
    ]
    b = [_h("https://u/3", 1, query_index=1), _h("https://u/1", 1, query_index=0)]
    combined, by_query = fuse_queries(["first", "second"], {"a": a, "b": b}, FusionMethod.RRF, 10)
    assert [q.query for q in by_query] == ["first", "second"]
    assert [r.url for r in by_query[0].results] == ["https://u/1"]
    assert [r.url for r in by_query[1].results] == ["https://u/3", "https://u/2"]
    assert {r.url for r in combined} == {"https://u/1", "https://u/2", "https://u/3"}
    assert combined[0].score == pytest.approx(2 / 61)
