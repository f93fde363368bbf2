"""Claims of fusion/ that its other tests left unasserted, each with the mutant it kills.

Found by mutation testing (`scripts/mutants fusion`, docs/mutants.md): every test here names the
one-line change of the product code that made no other test fail (docs/contributing.md).
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from fanfuse.fusion import fusers
from fanfuse.fusion.dedup import dedupe
from fanfuse.fusion.fuse import canonical_url, content_id, fuse, fuse_queries, fuse_with
from fanfuse.fusion.rerank_contract import FusedOrder, reordered
from fanfuse.fusion.urls import registered_domain
from fanfuse.wire.models import FusionMethod, Hit

SNIPPET = (
    "the laser cavity holds a gain medium between two mirrors and the light is amplified "
    "by stimulated emission until a coherent beam leaves through the partial mirror"
)


def hit(url: str, rank: int = 1, title: str = "t", snippet: str = "s", **kw: Any) -> Hit:
    return Hit(url=url, rank=rank, title=title, snippet=snippet, **kw)


# -- fuse.py --------------------------------------------------------------------------------------


def test_a_list_is_read_in_rank_order_not_in_the_order_given() -> None:
    """Kills `_by_rank`'s key dropped (`key=None`, no key) or made constant (`rank and 0`)."""
    given = [hit("https://u.org/2", 2), hit("https://u.org/1", 1)]
    results = fuse({"a": given}, FusionMethod.RRF, 10)
    assert [r.url for r in results] == ["https://u.org/1", "https://u.org/2"]
    assert [r.score for r in results] == [round(1 / 61, 10), round(1 / 62, 10)]


def test_concat_of_no_list_is_empty_and_scores_each_result_by_its_place() -> None:
    """Kills `_concat`: `divmod(...) if keys or True` (a division by zero on no list), the
    score `1.0 / i` -> `1.0 * i` or `2.0 / i`, ranks from 2 (`enumerate(taken, 2)`); and
    `Cluster.result`'s `round(score, 10)` -> `round(score, 11)`."""
    assert fuse({}, FusionMethod.CONCAT, 10) == []
    lists = {p: [hit(f"https://{p}.org/{i}", i) for i in (1, 2)] for p in ("a", "b")}
    results = fuse(lists, FusionMethod.CONCAT, 3)  # a's quota 1, b's (the last) 1 + 1
    assert [r.url for r in results] == ["https://a.org/1", "https://b.org/1", "https://b.org/2"]
    assert [r.rank for r in results] == [1, 2, 3]
    assert [r.score for r in results] == [1.0, 0.5, 0.3333333333]


def test_fuse_with_runs_any_fuser_on_the_same_path() -> None:
    """`fanfuse eval` scores fusers.VARIANTS through `fuse_with`. Kills every argument of its
    `_fuse` call dropped or None, and `_fuse` looking a fuser up in FUSERS (`isinstance(...)
    or True`)."""
    lists = {
        "a": [hit("https://u.org/1", 1, score=0.9), hit("https://u.org/2", 2, score=0.1)],
        "b": [hit("https://u.org/2", 1, score=0.9), hit("https://u.org/1", 2, score=0.1)],
    }
    fuser = fusers.VARIANTS["comb_mnz"]
    plain = fuse_with(lists, fuser, 10)
    assert [r.url for r in plain] == ["https://u.org/1", "https://u.org/2"]  # a tie: a's order
    assert [r.platforms for r in plain] == [["a", "b"], ["a", "b"]]
    weighted = fuse_with(lists, fuser, 1, weights={"a": 0.0, "b": 1.0})
    assert [(r.url, r.score) for r in weighted] == [("https://u.org/2", 2.0)]


def test_each_query_and_the_combined_list_take_the_limit_and_the_weights() -> None:
    """Kills `fuse_queries` passing no limit or no weights to the per-query `fuse` (positional
    or None), and no weights to the combined `_fuse`."""
    per_platform = {
        "a": [hit(f"https://a.org/{i}", i, query_index=q) for q in (0, 1) for i in (1, 2, 3)],
        "b": [hit(f"https://b.org/{i}", i, query_index=q) for q in (0, 1) for i in (1, 2, 3)],
    }
    combined, by_query = fuse_queries(
        ["q0", "q1"], per_platform, FusionMethod.RRF, 2, weights={"a": 0.0, "b": 1.0}
    )
    for query in by_query:
        assert [r.url for r in query.results] == ["https://b.org/1", "https://b.org/2"]
    assert [r.url for r in combined] == ["https://b.org/1", "https://b.org/2"]


# -- dedup.py -------------------------------------------------------------------------------------


def test_a_page_without_a_title_is_compared_not_divided_by_zero() -> None:
    """Kills `_containment`'s `not a or not b` -> `not a and not b` (0 / 0 on an empty title)."""
    lists = {
        "a": [hit("https://x.org/1", title="laser cavity mirrors", snippet=SNIPPET)],
        "b": [hit("https://x.org/2", title="", snippet=SNIPPET)],
    }
    assert len(dedupe(lists, {"a": "a", "b": "b"}).clusters) == 2


def test_only_a_title_votes_an_empty_one_never_wins_and_no_title_is_empty() -> None:
    """Kills `majority_title`: `if s.hit.title and ...` -> `or` (empty titles vote), the
    `default=""` made None, dropped or "XXXX" (no title at all)."""
    lists = {
        "a": [hit("https://x.org/1", title="")],
        "b": [hit("https://x.org/1", title="")],
        "c": [hit("https://x.org/1", title="Lasers")],
    }
    assert fuse(lists, FusionMethod.RRF, 10)[0].title == "Lasers"
    untitled = {"a": [hit("https://x.org/1", title="")], "b": [hit("https://x.org/1", title="")]}
    assert fuse(untitled, FusionMethod.RRF, 10)[0].title == ""


def test_titles_tied_on_votes_and_length_go_to_the_first_seen() -> None:
    """Kills `majority_title`'s `first.setdefault(title, i)` -> `(title, None)` or `(title)`."""
    lists = {
        "a": [hit("https://x.org/1", title="abcd")],
        "b": [hit("https://x.org/1", title="wxyz")],
    }
    assert fuse(lists, FusionMethod.RRF, 10)[0].title == "abcd"
    assert fuse(dict(reversed(lists.items())), FusionMethod.RRF, 10)[0].title == "wxyz"


def test_the_url_most_platforms_gave_wins_not_the_one_given_most_often() -> None:
    """Kills `display_url`'s `platforms.append(s.platform)` -> `append(None)` (hits counted)."""
    lists = {
        "a": [hit("https://www.x.org/p", 1), hit("https://www.x.org/p", 2)],
        "b": [hit("https://x.org/p")],
        "c": [hit("https://x.org/p")],
    }
    assert fuse(lists, FusionMethod.RRF, 10)[0].url == "https://x.org/p"


def test_pages_exactly_at_the_threshold_merge() -> None:
    """Title containment 4/5 = 0.8 = NEAR_DUPLICATE_THRESHOLD, identical snippets: one result.
    Kills `cluster_ids`' `similarity(...) >= threshold` -> `>`."""
    lists = {
        "a": [hit("https://x.org/1", title="alpha beta gamma delta epsilon", snippet=SNIPPET)],
        "b": [hit("https://x.org/2", title="alpha beta gamma delta zeta", snippet=SNIPPET)],
    }
    deduped = dedupe(lists, {"a": "a", "b": "b"})
    assert list(deduped.clusters) == ["https://x.org/1"]
    assert deduped.ids == {"a": ["https://x.org/1"], "b": ["https://x.org/1"]}


def test_a_near_duplicate_cluster_lists_its_urls_in_the_order_they_were_seen() -> None:
    """The near duplicate's URL, seen second, comes before the representative's other spelling,
    seen third. Kills `dedupe`'s `order += 1` -> `order = 1` (every hit seen at once)."""
    lists = {
        "a": [hit("https://x.org/p", title="laser cavity mirrors", snippet=SNIPPET)],
        "b": [hit("https://x.org/q", title="laser cavity mirrors", snippet=SNIPPET)],
        "c": [hit("http://x.org/p", title="laser cavity mirrors", snippet=SNIPPET)],
    }
    (result,) = fuse(lists, FusionMethod.RRF, 10)
    assert [v.url for v in result.variants] == [
        "https://x.org/p",
        "https://x.org/q",
        "http://x.org/p",
    ]
    assert result.metadata["near_duplicates"] == 1


# -- fusers.py ------------------------------------------------------------------------------------


def test_a_tie_goes_to_the_platform_where_a_document_first_reached_its_best_rank() -> None:
    """x is first on a (seen first) and first again on b (seen last); z, first on c (weight 2),
    ties x on score and best rank: x keeps a's place, ahead of z. Kills `_combine`'s
    `rank < entry.best_rank` -> `<=` (a later platform's equal rank taking the place)."""
    runs = {"a": [("x", None)], "c": [("z", None)], "b": [("x", None)]}
    fused = fusers.rrf(runs, weights={"a": 1.0, "c": 2.0, "b": 1.0})
    assert [doc for doc, _ in fused] == ["x", "z"]
    assert fused[0][1] == fused[1][1] == 2 / 61


def test_zscore_divides_by_the_standard_deviation() -> None:
    """Kills `(v - mean) / std` -> `(v - mean) * std`."""
    assert fusers.normalized_scores([("a", 4.0), ("b", 0.0)], "zscore") == [("a", 1.0), ("b", -1.0)]


RUNS: dict[str, fusers.Run] = {
    "a": [("x", 0.9), ("y", 0.1)],
    "b": [("y", 0.9), ("x", 0.1)],
}


@pytest.mark.parametrize(
    "fuser",
    [*fusers.FUSERS.values(), *fusers.VARIANTS.values()],
    ids=[*(m.value for m in fusers.FUSERS), *fusers.VARIANTS],
)
def test_every_fuser_applies_the_weights(fuser: fusers.Fuser) -> None:
    """Two platforms that disagree exactly: level, a's order wins the tie; a weighed 0, b's
    order wins. Kills each fuser's wrapper and `comb_mnz`/`rrf_score_weighted` dropping
    `weights` (None or left out)."""
    assert [doc for doc, _ in fuser(RUNS)] == ["x", "y"]
    assert [doc for doc, _ in fuser(RUNS, weights={"a": 0.0, "b": 1.0})] == ["y", "x"]


def test_the_zscore_variants_normalise_by_zscore() -> None:
    """Hand-computed on a run of three scores (0, 1, 5: mean 2, deviation sqrt(14/3)), so the
    min-max figures differ. Kills `_score_zscore` and `comb_mnz` losing `how` (min-max by
    default)."""
    runs: dict[str, fusers.Run] = {"a": [("x", 5.0), ("y", 1.0), ("z", 0.0)]}
    std = (14 / 3) ** 0.5
    shifted = {d: (v - 2) / std - (0 - 2) / std for d, v in (("x", 5), ("y", 1), ("z", 0))}
    for fused in (fusers.VARIANTS["score_zscore"](runs), fusers.comb_mnz(runs, how="zscore")):
        assert [doc for doc, _ in fused] == ["x", "y", "z"]
        assert [value for _, value in fused] == pytest.approx([shifted[d] for d in "xyz"])
    assert fusers.comb_mnz(runs) == [("x", 1.0), ("y", 0.2), ("z", 0.0)]


# -- rerank.py ------------------------------------------------------------------------------------


def _results(n: int) -> list[Any]:
    return fuse({"a": [hit(f"https://u.org/{i}", i) for i in range(1, n + 1)]}, FusionMethod.RRF, n)


def test_reordered_gives_the_rerankers_score_and_says_what_limit_is_wrong() -> None:
    """Kills `reordered`'s `"score"` update key misspelt (the fused score kept) and its
    ValueError without a message."""
    results = reordered(_results(2), [0.25, 0.75], 2)
    assert [(r.url, r.score) for r in results] == [
        ("https://u.org/2", 0.75),
        ("https://u.org/1", 0.25),
    ]
    with pytest.raises(ValueError, match="limit must be >= 0, got -1"):
        reordered(_results(1), [0.5], -1)


def test_the_fused_order_keeps_a_limit_of_zero_and_says_so() -> None:
    """Kills `FusedOrder.rerank`'s `limit < 0` -> `<= 0` or `< 1`, and its note changed."""
    kept = FusedOrder().rerank("q", _results(3), 0)
    assert (kept.results, kept.method, kept.note) == ([], "fused", "kept the fused order")
    assert [r.rank for r in FusedOrder().rerank("q", _results(3), 2).results] == [1, 2]


# -- urls.py --------------------------------------------------------------------------------------


def test_a_content_id_is_the_first_24_hex_digits_of_the_canonical_urls_sha256() -> None:
    """Ids name stored page content (`searches/{task}/contents/{id}`): they must not change
    between versions. Kills `[:24]` -> `[:25]`."""
    url = "http://www.x.org/a/?utm_source=z"
    digest = hashlib.sha256(canonical_url(url).encode()).hexdigest()
    assert content_id(url) == digest[:24] and canonical_url(url) == "https://x.org/a"


def test_only_a_web_url_has_a_registered_domain() -> None:
    """Kills `registered_domain`'s `scheme not in WEB_SCHEMES or not host` -> `and`."""
    assert registered_domain("ftp://news.bbc.co.uk/x") is None
    assert registered_domain("https://news.bbc.co.uk/x") == "bbc.co.uk"
