"""Dedup: the displayed URL, URL variants, merged fields, and near duplicates on the fixtures.

tests/fixtures/near_duplicates.json holds pairs of results on one registered domain: one page
under two URLs ("same"), or two pages that look alike ("distinct"). The threshold in dedup.py
was chosen from the similarities measured on them; `test_threshold_separates_the_fixtures`
pins those numbers.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fanfuse.fusion.dedup import (
    NEAR_DUPLICATE_THRESHOLD,
    Text,
    dedupe,
    similarity,
    text_of,
)
from fanfuse.fusion.fuse import fuse, fuse_queries
from fanfuse.fusion.urls import registered_domain
from fanfuse.wire.models import FusionMethod, Hit

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "near_duplicates.json"
PAIRS: list[dict[str, Any]] = json.loads(FIXTURES.read_text())["pairs"]
SAME = [p for p in PAIRS if p["label"] == "same"]
DISTINCT = [p for p in PAIRS if p["label"] == "distinct"]


def _h(url: str, rank: int = 1, title: str = "t", snippet: str = "s", **kw: Any) -> Hit:
    return Hit(url=url, rank=rank, title=title, snippet=snippet, **kw)


def _hit(side: dict[str, str], rank: int = 1) -> Hit:
    return Hit(url=side["url"], title=side["title"], snippet=side["snippet"], rank=rank)


def _text(side: dict[str, str]) -> Text:
    return text_of(side["title"], side["snippet"])


# -- the displayed URL and the variants ---------------------------------------------------------


def test_www_m_and_scheme_spellings_are_one_result_shown_as_most_platforms_gave_it() -> None:
    results = fuse(
        {
            "alpha": [_h("https://example.org/a")],
            "beta": [_h("https://www.example.org/a")],
            "gamma": [_h("http://m.example.org/a")],
            "delta": [_h("https://www.example.org/a?utm_source=feed")],
        },
        FusionMethod.RRF,
        10,
    )
    assert len(results) == 1
    top = results[0]
    assert top.url == "https://www.example.org/a"  # two platforms gave it, one the bare host
    assert top.platforms == ["alpha", "beta", "gamma", "delta"]
    assert [(v.url, v.platforms) for v in top.variants] == [
        ("https://example.org/a", ["alpha"]),
        ("https://www.example.org/a", ["beta"]),
        ("http://m.example.org/a", ["gamma"]),
        ("https://www.example.org/a?utm_source=feed", ["delta"]),
    ]


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        (["https://x.org/a?utm_source=g&utm_medium=cpc", "https://x.org/a"], "https://x.org/a"),
        (["https://x.org/a?utm_source=g&gclid=1"], "https://x.org/a"),  # cleaned even alone
        (["https://PHYSICS.Example.COM/Path"], "https://physics.example.com/Path"),
        (["http://x.org/a", "http://x.org/a", "https://x.org/a"], "https://x.org/a"),
        (["http://x.org/a", "http://www.x.org/a"], "http://x.org/a"),  # first seen
        (["https://m.x.org/a", "https://m.x.org/a", "http://x.org/a"], "https://m.x.org/a"),
        (["https://m.x.org/a", "https://x.org/a"], "https://x.org/a"),  # desktop before m.
        (["https://x.org/a#top", "https://x.org/a?fbclid=9"], "https://x.org/a"),
        (["https://x.org/a/", "https://x.org/a"], "https://x.org/a/"),  # the path as given
    ],
)
def test_the_cleanest_url_is_shown(given: list[str], shown: str) -> None:
    lists = {f"p{i}": [_h(url)] for i, url in enumerate(given)}
    (result,) = fuse(lists, FusionMethod.RRF, 10)
    assert result.url == shown
    assert [v.url for v in result.variants] == list(dict.fromkeys(given))


def test_a_url_given_by_several_platforms_is_one_variant_listing_them() -> None:
    url = "https://x.org/a?utm_source=feed"
    (result,) = fuse({"a": [_h(url)], "b": [_h(url)], "c": [_h(url)]}, FusionMethod.RRF, 10)
    assert [(v.url, v.platforms) for v in result.variants] == [(url, ["a", "b", "c"])]


# -- merged fields ------------------------------------------------------------------------------


def test_earliest_published_at_first_language_and_every_rank() -> None:
    late = datetime(2024, 5, 1, tzinfo=UTC)
    early = datetime(2023, 1, 2)  # naive: taken as UTC
    (result,) = fuse(
        {
            "a": [_h("https://x.org/1", 3, published_at=late)],
            "b": [_h("https://x.org/1", 1)],
            "c": [_h("https://www.x.org/1", 2, published_at=early, language="de")],
            "d": [_h("http://x.org/1", 5, language="en")],
        },
        FusionMethod.RRF,
        10,
    )
    assert result.published_at == early
    assert result.language == "de"
    assert result.ranks == {"a": 3, "b": 1, "c": 2, "d": 5}


@pytest.mark.parametrize(
    ("titles", "winner"),
    [
        (["Short", "A much longer title", "Short"], "Short"),  # majority beats length
        (["Short", "A much longer title"], "A much longer title"),  # 1:1, the longer
        (["Alpha", "Gamma"], "Alpha"),  # 1:1, same length: the first seen
        (["", "Only title"], "Only title"),  # an empty title does not vote
    ],
)
def test_title_is_the_majority_of_platforms(titles: list[str], winner: str) -> None:
    lists = {f"p{i}": [_h("https://x.org/1", title=t)] for i, t in enumerate(titles)}
    (result,) = fuse(lists, FusionMethod.RRF, 10)
    assert result.title == winner


def test_a_platform_votes_once_with_its_first_title() -> None:
    results, _ = fuse_queries(
        ["q1", "q2"],
        {
            "a": [
                _h("https://x.org/1", title="From a", query_index=0),
                _h("https://x.org/1", title="Also from a", query_index=1),
            ],
            "b": [_h("https://x.org/1", title="Also from a", query_index=0)],
        },
        FusionMethod.RRF,
        10,
    )
    assert results[0].title == "Also from a"  # "From a" 1 vote, "Also from a" 1: the longer


def test_content_and_its_id_come_from_one_hit() -> None:
    (result,) = fuse(
        {
            "a": [_h("https://x.org/1", content_id="stored-a")],
            "b": [_h("https://www.x.org/1", content="the longer page text")],
            "c": [_h("http://x.org/1", content="short")],
        },
        FusionMethod.RRF,
        10,
    )
    assert result.content == "the longer page text"
    assert result.content_id is not None and result.content_id != "stored-a"


# -- near duplicates ----------------------------------------------------------------------------


@pytest.mark.parametrize("pair", SAME, ids=[p["case"] for p in SAME])
def test_one_page_under_two_urls_is_one_result(pair: dict[str, Any]) -> None:
    results = fuse({"alpha": [_hit(pair["a"])], "beta": [_hit(pair["b"])]}, FusionMethod.RRF, 10)
    assert len(results) == 1
    (result,) = results
    assert result.metadata["near_duplicates"] == 1
    assert result.platforms == ["alpha", "beta"]
    assert result.ranks == {"alpha": 1, "beta": 1}
    assert [v.url for v in result.variants] == [pair["a"]["url"], pair["b"]["url"]]
    assert result.score == pytest.approx(2 / 61)  # both lists' evidence, fused once


@pytest.mark.parametrize("pair", DISTINCT, ids=[p["case"] for p in DISTINCT])
def test_different_pages_that_look_alike_stay_apart(pair: dict[str, Any]) -> None:
    results = fuse({"alpha": [_hit(pair["a"])], "beta": [_hit(pair["b"])]}, FusionMethod.RRF, 10)
    assert len(results) == 2
    assert all("near_duplicates" not in r.metadata for r in results)


def test_fixtures_are_on_one_domain_under_two_keys() -> None:
    for pair in PAIRS:
        hits = {"a": [_hit(pair["a"])], "b": [_hit(pair["b"])]}
        domains = {registered_domain(h[0].url) for h in hits.values()}
        assert len(domains) == 1 and None not in domains, pair["case"]
        exact_only = dedupe(hits, {"a": "a", "b": "b"}, threshold=1.1)
        assert len(exact_only.clusters) == 2, pair["case"]


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b)


def _words(side: dict[str, str]) -> set[str]:
    return set(re.findall(r"\w+", f"{side['title']} {side['snippet']}".lower()))


def test_threshold_separates_the_fixtures() -> None:
    """The numbers in dedup.py's docstring: the threshold sits between the two distributions."""
    same = [similarity(_text(p["a"]), _text(p["b"])) for p in SAME]
    distinct = [similarity(_text(p["a"]), _text(p["b"])) for p in DISTINCT]
    assert (len(same), len(distinct)) == (12, 13)
    assert min(same) == pytest.approx(6 / 7)
    assert sorted(same).count(1.0) == 11
    assert max(distinct) == pytest.approx(3 / 4)
    assert max(distinct) < NEAR_DUPLICATE_THRESHOLD <= min(same)

    lectures = next(p for p in DISTINCT if p["case"].startswith("two lectures"))
    a, b = _text(lectures["a"]), _text(lectures["b"])
    without_numbers = replace(a, title_numbers=frozenset())
    assert similarity(without_numbers, b) == pytest.approx(5 / 6)  # would merge without the rule

    # plain token-set Jaccard over title and snippet: the two sets overlap
    jaccard_same = [_jaccard(_words(p["a"]), _words(p["b"])) for p in SAME]
    jaccard_distinct = [_jaccard(_words(p["a"]), _words(p["b"])) for p in DISTINCT]
    assert min(jaccard_same) == pytest.approx(0.794, abs=1e-3)
    assert max(jaccard_distinct) == pytest.approx(0.926, abs=1e-3)


def test_near_duplicates_merge_only_within_a_registered_domain() -> None:
    pair = SAME[0]
    elsewhere = {**pair["b"], "url": "https://www.theguardian.co.uk/science/2024/x"}
    results = fuse({"a": [_hit(pair["a"])], "b": [_hit(elsewhere)]}, FusionMethod.RRF, 10)
    assert len(results) == 2


@pytest.mark.parametrize(
    "host", ["vaswani.local", "localhost:8080", "127.0.0.1:5000", "intranet.internal"]
)
def test_no_near_duplicates_without_a_known_registered_domain(host: str) -> None:
    def lists(on: str) -> dict[str, list[Hit]]:
        title, snippet = "One title", "the very same snippet text on both documents, word for word"
        return {
            "a": [_h(f"https://{on}/doc/1", title=title, snippet=snippet)],
            "b": [_h(f"https://{on}/doc/2", title=title, snippet=snippet)],
        }

    assert len(fuse(lists(host), FusionMethod.RRF, 10)) == 2
    assert len(fuse(lists("example.org"), FusionMethod.RRF, 10)) == 1  # the same on the web


def test_near_duplicates_merge_before_scoring() -> None:
    amp, canonical = SAME[1]["b"], SAME[1]["a"]
    other = _h("https://elsewhere.org/x", title="Other", snippet="something else entirely here")
    results = fuse(
        {"alpha": [other, _hit(amp, 2)], "beta": [_hit(canonical, 1), other]},
        FusionMethod.RRF,
        10,
    )
    assert len(results) == 2
    merged = next(r for r in results if r.metadata.get("near_duplicates"))
    assert merged.score == pytest.approx(1 / 62 + 1 / 61)
    assert merged.ranks == {"alpha": 2, "beta": 1}
    assert merged.platform == "alpha"  # first seen: alpha's list comes first
    assert merged.url == "https://www.bbc.co.uk/news/amp/science-environment-68412345"
    assert [v.url for v in merged.variants] == [amp["url"], canonical["url"]]


def test_a_list_counts_a_cluster_once_at_its_best_rank() -> None:
    pair = SAME[0]
    results = fuse(
        {"alpha": [_hit(pair["a"], 1), _hit(pair["b"], 2), _h("https://u.org/z", 3)]},
        FusionMethod.RRF,
        10,
    )
    assert [r.score for r in results] == pytest.approx([1 / 61, 1 / 62])
    assert results[0].ranks == {"alpha": 1}


def test_clusters_compare_with_their_representative_only() -> None:
    words = [f"w{i}" for i in range(30)]
    a = _h("https://x.org/a", title="Same title", snippet=" ".join(words[0:15]))
    b = _h("https://x.org/b", title="Same title", snippet=" ".join(words[0:20]))
    c = _h("https://x.org/c", title="Same title", snippet=" ".join(words[5:20]))
    ta, tb, tc = (text_of(h.title, h.snippet) for h in (a, b, c))
    assert similarity(ta, tb) >= NEAR_DUPLICATE_THRESHOLD
    assert similarity(tb, tc) >= NEAR_DUPLICATE_THRESHOLD
    assert similarity(ta, tc) < NEAR_DUPLICATE_THRESHOLD
    deduped = dedupe({"p": [a, b, c]}, {"p": "p"})
    assert deduped.ids["p"] == [
        "https://x.org/a", "https://x.org/a", "https://x.org/c"
    ]  # fmt: skip


def test_too_little_text_never_merges() -> None:
    words = [f"w{i}" for i in range(30)]
    ten, nine = " ".join(words[:10]), " ".join(words[:9])
    assert similarity(text_of("", ten), text_of("", ten)) == 0.0  # no title
    assert similarity(text_of("T", nine), text_of("T", nine)) == 0.0  # under 10 words
    assert similarity(text_of("T", ten), text_of("T", ten)) == 1.0
    long = text_of("T", " ".join(words))  # 28 shingles
    assert similarity(text_of("T", " ".join(words[:16])), long) == 1.0  # 14: half, contained
    assert similarity(text_of("T", " ".join(words[:15])), long) == 0.0  # 13: under half


def test_concat_takes_a_cluster_once() -> None:
    pair = SAME[0]
    results = fuse(
        {"a": [_hit(pair["a"], 1), _h("https://u.org/2", 2)], "b": [_hit(pair["b"], 1)]},
        FusionMethod.CONCAT,
        4,
    )
    assert len(results) == 2
    assert results[0].platforms == ["a", "b"]


def test_fixture_merge_count() -> None:
    """Every fixture result fused in one list per side: the 12 same-page pairs merge, no other."""
    lists = {
        "alpha": [_hit(p["a"], i) for i, p in enumerate(PAIRS, 1)],
        "beta": [_hit(p["b"], i) for i, p in enumerate(PAIRS, 1)],
    }
    results = fuse(lists, FusionMethod.RRF, 100)
    merged = [r for r in results if r.metadata.get("near_duplicates")]
    assert sum(r.metadata["near_duplicates"] for r in merged) == 12
    distinct_urls = {u for p in PAIRS for u in (p["a"]["url"], p["b"]["url"])}
    assert sum(len(r.variants) for r in results) == len(distinct_urls)
