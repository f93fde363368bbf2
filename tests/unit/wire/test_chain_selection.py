"""The platform spec's chains (`google|brave`: wire/selection.py) as `SearchRequest` validates
them, and `hedge_after_s`: what an entry means, what is refused, and what `all` groups."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from fanfuse.wire.modes import MODES, Mode
from fanfuse.wire.request import SearchRequest
from fanfuse.wire.selection import MAX_PLATFORM_NAMES, split_entries

RUNNABLE = ["docs", "google", "brave", "tavily", "perplexity"]
UNAVAILABLE = {"builtin": "missing or invalid settings: FANFUSE_BUILTIN_API_KEY"}
CHAINS = {"builtin": ["perplexity"], "google": ["brave"]}


def context(**over: Any) -> dict[str, Any]:
    """A deployment where builtin runs only through its chain, google has brave behind it."""
    found: dict[str, Any] = {
        "available": [*RUNNABLE, "builtin"],
        "unavailable": UNAVAILABLE,
        "runnable": RUNNABLE,
        "chains": CHAINS,
        "deadline_seconds": 60.0,
    }
    return {**found, **over}


def parse(platform: Any, **fields: Any) -> SearchRequest:
    body = {"query": "q", "platform": platform, **fields}
    return SearchRequest.model_validate(body, context=context())


def problem(platform: Any, **fields: Any) -> str:
    with pytest.raises(ValidationError) as refused:
        parse(platform, **fields)
    [error] = refused.value.errors()
    return str(error["msg"])


@pytest.mark.parametrize(
    ("spec", "entries"),
    [
        ("tavily|brave", ["tavily|brave"]),
        (" Tavily | BRAVE ,docs", ["tavily|brave", "docs"]),
        (["tavily|brave", "docs"], ["tavily|brave", "docs"]),
        ("docs|tavily|brave", ["docs|tavily|brave"]),  # any length
        ("tavily|tavily|brave", ["tavily|brave"]),  # a member named twice: once
        ("tavily|brave, brave", ["tavily", "brave"]),  # entered alone: not a fallback too
        ("tavily|brave, docs|brave", ["tavily|brave", "docs"]),  # the first chain keeps it
        ("docs, docs|tavily", ["docs"]),  # a run named twice: where it first appears
        ("google", ["google|brave"]),  # a name alone carries the deployment's chain
        ("google|tavily", ["google|tavily"]),  # a spelled chain replaces it
        ("google, brave", ["google", "brave"]),  # brave asked in its own right
        ("builtin", ["builtin|perplexity"]),  # the design's builtin -> perplexity
        ("builtin, perplexity", ["perplexity"]),  # builtin cannot run itself: only perplexity
    ],
)
def test_an_entry_is_one_platform_run_and_each_platform_is_asked_once(
    spec: Any, entries: list[str]
) -> None:
    request = parse(spec)
    assert request.platform == entries
    assert request.platforms == [entry.split("|")[0] for entry in entries]
    assert request.chains == {e.split("|")[0]: e.split("|") for e in entries if "|" in e}


def test_all_groups_the_deployments_chains_and_leaves_their_fallbacks_out() -> None:
    request = parse("all")
    assert request.platform == ["docs", "google|brave", "tavily", "builtin|perplexity"]
    fast = SearchRequest.model_validate(
        {"query": "q", "mode": "fast"},
        context={**context(), "by_latency": lambda names: sorted(names)},
    )
    quickest = MODES[Mode.FAST].quickest
    assert quickest == 2  # by name here: builtin, docs; listed in `all`'s order
    assert fast.platform == ["docs", "builtin|perplexity"]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("google|", "fallback chain 'google|' has an empty name"),
        ("|google", "has an empty name"),
        ("google||brave", "has an empty name"),
        ("google|nope", "unknown platform 'nope'"),
        ("all|docs", '"all" cannot be combined'),
        ("all, docs|google", '"all" cannot be combined'),
    ],
)
def test_a_malformed_or_unknown_chain_is_refused_naming_it(spec: str, says: str) -> None:
    assert says in problem(spec)


def test_a_chain_needs_one_member_that_can_run_here_and_says_why_none_can() -> None:
    runnable = ["docs"]
    ctx = context(runnable=runnable, available=runnable, chains={})
    unavailable = {"google": "missing FANFUSE_GOOGLE_API_KEY", "brave": "missing BRAVE key"}
    ctx["unavailable"] = unavailable
    with pytest.raises(ValidationError) as refused:
        SearchRequest.model_validate({"query": "q", "platform": "google|brave"}, context=ctx)
    message = str(refused.value.errors()[0]["msg"])
    assert "no member of the chain 'google|brave' is available here" in message
    assert "FANFUSE_GOOGLE_API_KEY" in message and "BRAVE key" in message
    kept = SearchRequest.model_validate({"query": "q", "platform": "google|docs"}, context=ctx)
    assert kept.platform == ["google|docs"]  # google is passed over at run time, saying why


def test_names_are_counted_chain_members_included_before_any_is_looked_up() -> None:
    assert len(split_entries("|".join(["docs"] * MAX_PLATFORM_NAMES))[0]) == MAX_PLATFORM_NAMES
    with pytest.raises(ValueError, match=f"at most {MAX_PLATFORM_NAMES} platform names"):
        split_entries("|".join(["docs"] * (MAX_PLATFORM_NAMES + 1)))


def test_max_platforms_counts_runs_not_members() -> None:
    ctx = context(max_platforms=1)
    request = SearchRequest.model_validate({"query": "q", "platform": "tavily|brave"}, context=ctx)
    assert request.platforms == ["tavily"]
    with pytest.raises(ValidationError, match="at most 1 platforms"):
        SearchRequest.model_validate({"query": "q", "platform": "tavily, docs"}, context=ctx)


@pytest.mark.parametrize("value", [0.5, 0, 2, "p90", "off", None])
def test_hedge_after_s_takes_seconds_p90_or_off(value: float | str | None) -> None:
    assert parse("tavily|brave", hedge_after_s=value).hedge_after_s == value


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (-1, "greater than or equal to 0"),
        (61, "at most the deployment's deadline"),
        ("soon", "p90"),
        (True, "valid number"),
        ("0.5", "valid number"),
    ],
)
def test_hedge_after_s_refuses_what_is_not_a_delay(value: Any, says: str) -> None:
    with pytest.raises(ValidationError) as refused:
        parse("tavily|brave", hedge_after_s=value)
    assert all(e["loc"][0] == "hedge_after_s" for e in refused.value.errors())
    assert says in str(refused.value)


def test_a_stored_request_reads_back_its_chains_without_a_context() -> None:
    request = parse("google, docs", hedge_after_s=0.5)
    again = SearchRequest.model_validate(request.model_dump())
    assert again.platform == ["google|brave", "docs"] and again.hedge_after_s == 0.5
