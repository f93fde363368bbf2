"""The request's limits at their edges and the 400s that name them, and the options' two
derived forms (the domain filters apart, the cache key).

Found by mutation testing (`scripts/mutants wire`, docs/mutants.md): each test names the
mutants it kills. A limit is checked on both sides of its edge, a refusal by what it says.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from fanfuse.wire import selection
from fanfuse.wire.fields import MAX_SHOWN_CHARS, shown
from fanfuse.wire.inbound import MAX_JSON_DEPTH, bad_characters, character_problem
from fanfuse.wire.models import SearchRequest
from fanfuse.wire.options import (
    MAX_DOMAINS,
    SearchOptions,
    TimeRange,
    domain_problem,
    normalize_domain,
)
from fanfuse.wire.selection import Here

AVAILABLE = ["docs", "vectors", "google"]


def parse(context: dict[str, Any] | None = None, **fields: Any) -> SearchRequest:
    return SearchRequest.model_validate(fields, context=context or {"available": AVAILABLE})


def refusal(context: dict[str, Any] | None = None, **fields: Any) -> str:
    """The one problem a request is refused for, as the 400 states it (exactly: a check that
    the text only contains the message would let a misspelt one through)."""
    with pytest.raises(ValidationError) as info:
        parse(context, **fields)
    [error] = info.value.errors()
    return str(error["msg"]).removeprefix("Value error, ")


# -- domains -----------------------------------------------------------------------------------


def test_at_most_max_domains() -> None:
    """Kills `len(value) > MAX_DOMAINS` -> `>=`."""
    domains = [f"d{i}.example.org" for i in range(MAX_DOMAINS)]
    assert parse(query="q", include_domains=domains).include_domains == domains
    too_many = [*domains, "one-more.org"]
    assert refusal(query="q", include_domains=too_many) == "at most 20 domains, got 21"


def test_a_host_name_of_253_characters_is_one_and_254_is_not() -> None:
    """RFC 1035's limit, before and after IDNA encoding. Kills `> MAX_HOST_CHARS` -> `>=`,
    domain_problem's `> 253` -> `>= 253` or `> 254`, and the refusal's message lost."""
    longest = "a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 61
    assert len(longest) == 253
    assert parse(query="q", include_domains=[longest]).include_domains == [longest]
    assert domain_problem(longest) is None
    assert domain_problem(longest + "d") == f"{longest + 'd'!r} is not a host name"
    too_long = refusal(query="q", include_domains=[longest + "d"])
    assert too_long == f"{shown(longest + 'd')} is not a host name"


def test_a_label_is_at_most_63_characters_and_never_ends_with_a_hyphen() -> None:
    """Kills the label limit `> 63` -> `>= 63` or `> 64`, and `endswith("-")` misspelt."""
    assert domain_problem("a" * 63 + ".org") is None
    assert domain_problem("a" * 64 + ".org") == f"{'a' * 64 + '.org'!r} is not a host name"
    assert domain_problem("shop-.example.org") == "'shop-.example.org' is not a host name"
    assert domain_problem("shop-1.example.org") is None


def test_a_domain_of_another_shape_is_refused_with_what_to_send() -> None:
    """Kills the messages of `_domains` misspelt (not a list, not strings)."""
    assert refusal(query="q", include_domains=5) == "must be a list of host names"
    assert refusal(query="q", exclude_domains=["a.org", 7]) == "domains must be strings"


def test_a_domain_is_written_as_urls_carry_it() -> None:
    """Lower case, no trailing dot, punycode; an upper-case name ending in X keeps its X
    (`.TAX` is a top-level domain). Kills the trailing-dot strip widened to `X`."""
    assert normalize_domain(" Shop.Example.TAX. ") == "shop.example.tax"
    assert normalize_domain("Bücher.Example") == "xn--bcher-kva.example"


# -- weights and names -------------------------------------------------------------------------


def test_weights_are_bounded_in_number_and_name_length() -> None:
    """A stored request is read back without a context: its weights are only shaped. Kills the
    64-weight and 40-character limits taken at `>=`, the long name's message lost, and
    `_available` reading a missing context as a list."""
    stored = {"available": None}
    weights = {f"p{i}": 1.0 for i in range(selection.MAX_PLATFORM_NAMES)}
    assert parse(stored, query="q", weights=weights).weights == weights
    weights["one_more"] = 1.0
    assert refusal(stored, query="q", weights=weights) == "at most 64 weights, got 65"
    forty = "p" * selection.MAX_NAME_CHARS
    assert parse(stored, query="q", weights={forty: 2.0}).weights == {forty: 2.0}
    assert refusal(stored, query="q", weights={forty + "p": 2.0}) == (
        f"weight for {shown(forty + 'p')}: a platform name is at most 40 characters"
    )


def test_a_value_of_the_longest_shown_length_is_quoted_whole() -> None:
    """Kills `len(value) <= MAX_SHOWN_CHARS` -> `<`."""
    value = "x" * MAX_SHOWN_CHARS
    assert shown(value) == repr(value)
    assert shown(value + "x") == f"{value!r}... ({MAX_SHOWN_CHARS + 1} characters)"


def test_a_joiner_between_latin_and_arabic_letters_is_refused() -> None:
    """A joiner joins two letters of a script that joins: one after a Latin letter only hides
    itself, whatever follows. Kills `joins` reading the character after it twice, and a
    joiner that joins ending the scan (`continue` -> `break`)."""
    assert character_problem("\u0628\u200d\u0628") is None
    # a joiner that joins does not end the scan: what follows it is judged too
    assert character_problem("\u0628\u200d\u0628 \u202e") == "contains the bidi control U+202E"
    assert character_problem("a\u200d\u0628") == (
        "contains the zero-width character U+200D (a joiner is kept only inside a word of a "
        "script that joins, or an emoji sequence)"
    )


def test_the_selection_lists_every_name_once_in_order() -> None:
    """What `fanfuse search --platform` and `serve --warm` read: chains' members included."""
    assert selection.split_platforms("docs, Google|brave, docs") == ["docs", "google", "brave"]


# -- what a refused selection says -------------------------------------------------------------


def test_unknown_names_are_quoted_together_and_none_is_available() -> None:
    """Kills the quoted names' separator and the "none" of an empty list misspelt."""
    here = Here(alone=[])
    with pytest.raises(ValueError) as info:
        selection.resolve([["bing"], ["yandex"]], here)
    assert str(info.value) == "unknown platform 'bing', 'yandex'; available: none"


def test_a_name_whose_deployment_chain_cannot_run_says_why_for_each_member() -> None:
    """Kills `_not_here`'s reasons (joined, prefixed "fallback", defaulted to "not available")
    and its list of what is available, each misspelt or lost."""
    with pytest.raises(ValueError) as info:
        selection.resolve([["google"]], Here(alone=["docs"], unavailable={"google": "no API key"}))
    assert str(info.value) == (
        "platform not available here ('google': no API key); available: docs"
    )
    here = Here(
        alone=["docs", "vectors"],
        unavailable={"google": "no API key", "brave": "no API key"},
        runnable=["docs"],
        chains={"google": ["brave", "vectors"]},
    )
    with pytest.raises(ValueError) as info:
        selection.resolve([["google"]], here)
    assert str(info.value) == (
        "platform not available here ('google': no API key; fallback 'brave': no API key; "
        "fallback 'vectors': not available); available: docs, vectors"
    )


def test_a_chain_none_of_whose_members_can_run_says_why_for_each() -> None:
    """The same for a chain the request spells: no "fallback" there, every member its own."""
    here = Here(alone=[], unavailable={"google": "no API key", "brave": "no API key"})
    with pytest.raises(ValueError) as info:
        selection.resolve([["google", "brave"]], here)
    assert str(info.value) == (
        "no member of the chain 'google|brave' is available here ('google': no API key; "
        "'brave': no API key); available: none"
    )
    here = Here(alone=["docs", "vectors"], runnable=["docs"])
    with pytest.raises(ValueError) as info:
        selection.resolve([["vectors", "vectors"]], here)
    assert "('vectors': not available; 'vectors': not available); available: docs, vectors" in (
        str(info.value)
    )


def test_all_with_nothing_available_says_where_to_look() -> None:
    """Kills `everything`'s message lost or misspelt."""
    assert refusal({"available": []}, query="q") == (
        "no platform is available (see `fanfuse platforms`)"
    )


def test_a_selection_of_another_shape_is_refused_with_what_to_send() -> None:
    """Kills the messages of `split_entries` and `resolve` lost or misspelt (the existing
    tests found them inside longer text, which a misspelt message still contains)."""
    assert refusal(query="q", platform=5) == "platform must be a string or a list of strings"
    assert refusal(query="q", platform=["docs", 5]) == "platform names must be strings"
    assert refusal(query="q", platform=" , ") == "platform selection is empty"
    assert refusal(query="q", platform="all, docs") == (
        '"all" cannot be combined with other platform names'
    )
    assert refusal(query="q", platform="google|") == (
        "fallback chain 'google|' has an empty name: write names joined by |, as in google|brave"
    )


def test_a_platform_name_is_at_most_40_characters() -> None:
    """Kills `len(name) > MAX_NAME_CHARS` -> `>=` and the refusal's message lost."""
    forty = "p" * selection.MAX_NAME_CHARS
    assert selection.split_entries(f"docs, {forty}") == [["docs"], [forty]]
    with pytest.raises(ValueError) as info:
        selection.split_entries(forty + "p")
    assert str(info.value) == f"platform name {shown(forty + 'p')} is longer than 40 characters"


def test_all_means_the_quickest_under_a_deployments_platform_cap() -> None:
    """`max_platforms` caps what `all` means (the quickest, by measured latency), where
    naming more is a 400. Kills the context's `max_platforms` not read for `all`."""
    context = {
        "available": ["docs", "vectors", "google"],
        "max_platforms": 2,
        "by_latency": lambda names: sorted(names, key=["google", "docs", "vectors"].index),
    }
    assert parse(context, query="q").platforms == ["docs", "google"]
    assert refusal(context, query="q", platform="docs, vectors, google") == (
        "at most 2 platforms per request on this deployment, got 3"
    )


def test_a_key_that_is_not_a_string_is_a_validation_error() -> None:
    """From the Python API a dict may have any keys (JSON's are strings): such a key is
    refused like any other wrong type, never judged as text. Kills `bad_characters` asking
    `character_problem` about a key that is not a string."""
    with pytest.raises(ValidationError) as info:
        SearchRequest.model_validate({"query": "q", "weights": {1: 2.0}})
    assert info.value.errors()[0]["loc"] == ("weights", 1, "[key]")


def test_the_walk_for_unseen_characters_stops_at_the_json_depth_limit() -> None:
    """The walk goes MAX_JSON_DEPTH levels deep and no deeper (a cyclic dict from the Python
    API cannot make it loop). Kills `len(loc) >= MAX_JSON_DEPTH` -> `>`."""
    deep: Any = "\x00"
    for _ in range(MAX_JSON_DEPTH):
        deep = [deep]
    assert [len(loc) for loc, _ in bad_characters(deep)] == [MAX_JSON_DEPTH]
    assert list(bad_characters([deep])) == []


# -- the options' derived forms ----------------------------------------------------------------


def test_the_domain_filters_split_from_the_other_options() -> None:
    """A platform whose URLs are redirects is filtered by domain after they resolve
    (stages/resolving.py), by everything else before. Kills `split_domains` losing either
    half or either list."""
    options = SearchOptions(
        include_domains=["a.org"], exclude_domains=["b.org"], time_range=TimeRange.WEEK
    )
    without, only = options.split_domains()
    assert without == SearchOptions(time_range=TimeRange.WEEK)
    assert only == SearchOptions(include_domains=["a.org"], exclude_domains=["b.org"])


def test_the_cache_key_does_not_depend_on_the_order_of_domains() -> None:
    """Two requests that exclude the same domains in another order are one cache entry.
    Kills the sorting of `exclude_domains` misspelt."""
    one = SearchOptions(include_domains=["b.org", "a.org"], exclude_domains=["d.org", "c.org"])
    other = SearchOptions(include_domains=["a.org", "b.org"], exclude_domains=["c.org", "d.org"])
    assert one.key() == other.key()
