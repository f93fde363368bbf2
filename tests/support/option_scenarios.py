"""The per-request option scenarios, written once and run on both runtimes.

`tests/integration/test_embedded_options.py` runs them on the embedded runtime and
`tests/e2e/test_e2e_options.py` on the emulator stack, so both are held to one set of
expectations. Here: the web doubles (searxng platforms on a `StubSearxServer`), the requests,
and the checks, which read JSON-shaped views (the status answer, a platform document) the same
way whichever runtime produced them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from fanfuse.tools.stubs import StubSearxServer

DOUBLES = {
    "web_flaky": "fail-query/zz500",
    "web_d1": "domains/a.example,news.b.example",
    "web_d2": "domains/www.b.example,c.example",
    "web_d3": "domains/c.example,a.example,ab.example",
    "web_slow": "delay/3",
}
"""name -> stub behaviour (see `StubSearxServer`). The domain doubles serve their 10 results on
their hosts in turn: web_d3's are c, a, ab, c, a, ab, ... (4 on c.example, 3 on each other)."""

MULTI_QUERY = {"query": ["permittivity", "other zz500"], "platform": ["web_flaky"]}

INCLUDE = ["a.example", "b.example"]
EXCLUDE = ["news.b.example"]
DOMAINS = {
    "query": "domains",
    "platform": ["web_d1", "web_d2", "web_d3"],
    "include_domains": INCLUDE,
    "exclude_domains": EXCLUDE,
    "max_results": 20,
}
REMOVED = {
    "web_d1": {"include_domains": 0, "exclude_domains": 5},  # news.b.example: in b, excluded
    "web_d2": {"include_domains": 5, "exclude_domains": 0},  # c.example; www.b.example stays
    "web_d3": {"include_domains": 7, "exclude_domains": 0},  # c.example, ab.example (not a.*)
}
"""What the post-filters remove per platform; a result counts against the first filter that
removes it (include before exclude)."""
KEPT_HOSTS = {"a.example", "www.b.example"}
KEPT = 5 + 5 + 3

TIMEOUT = {"query": "slow or fast", "platform": ["web_ok", "web_slow"], "timeout_s": 1}
TIMEOUT_BOUND = 1.5
"""Start -> terminal status seen by a poller, for `timeout_s: 1`: the issue's bound. The margin,
0.5 s, pays for the finalization after the deadline (a timer or a Cloud Tasks dispatch, one
store transaction), one poll interval (0.05 s) and the start call itself."""
POLL = 0.05
REWRITE_GAP = 1.2
"""Seconds between two writes of one cache entry: Firestore skips a rewrite within 1 s
(`MIN_CACHE_REWRITE_S`), so a refresh is only visible after that."""


def web_platforms(stub: StubSearxServer, doubles: dict[str, str]) -> dict[str, dict[str, Any]]:
    """`FANFUSE_EXTRA_PLATFORMS` entries: a searxng platform per double, one attempt each."""
    return {
        name: {
            "engine": "searxng",
            "settings": {"base_url": stub.url(path), "max_attempts": 1, "timeout": 60},
        }
        for name, path in doubles.items()
    }


def host(result: dict[str, Any]) -> str | None:
    url: str = result["url"]
    return urlsplit(url).hostname


# ---------------------------------------------------------------------------------------------
# What each outcome must look like


def check_multi_query(view: dict[str, Any], run: dict[str, Any]) -> None:
    """One query of two got HTTP 500: partial, the other query's results, the failure listed."""
    assert view["status"] == "partial", view
    assert view["errors"] == []  # the platform itself succeeded
    assert run["state"] == "succeeded", run
    (failure,) = run["failed_queries"]
    assert failure["platform"] == "web_flaky"
    assert (failure["query_index"], failure["query"]) == (1, "other zz500")
    assert "HTTP 500" in failure["error"], failure
    first, second = view["results_by_query"]
    assert first["query"] == "permittivity" and first["failed"] == []
    assert len(first["results"]) == 10
    assert all("permittivity" in r["title"] for r in first["results"])
    assert second["query"] == "other zz500" and second["results"] == []
    assert second["failed"] == [failure]
    assert view["results"] and all("permittivity" in r["title"] for r in view["results"])


def check_domains(view: dict[str, Any], runs: dict[str, dict[str, Any]]) -> None:
    """Only included hosts (subdomains too), none excluded; each removal counted where made."""
    assert view["status"] == "completed", view
    hosts = [host(r) for r in view["results"]]
    assert len(hosts) == KEPT and set(hosts) == KEPT_HOSTS, hosts
    for name, removed in REMOVED.items():
        options = runs[name]["options"]
        assert options == {
            option: {"applied": "post_filter", "removed": n} for option, n in removed.items()
        }, (name, options)
    assert view["filtered"] == {
        option: sum(r[option] for r in REMOVED.values()) for option in REMOVED["web_d1"]
    }
    assert view["filtered"] == {"include_domains": 12, "exclude_domains": 5}


def check_timeout(view: dict[str, Any], elapsed: float) -> None:
    """Finalized at the deadline with what had arrived: the slow platform timed out."""
    assert view["status"] == "partial", view
    states = {r["name"]: r["state"] for r in view["platform_runs"]}
    assert states == {"web_ok": "succeeded", "web_slow": "timed_out"}, states
    assert view["errors"] == [
        {"platform": "web_slow", "state": "timed_out", "error": "no result before the deadline"}
    ]
    assert view["results"] and {r["platform"] for r in view["results"]} == {"web_ok"}
    assert elapsed >= 0.9, elapsed  # it did wait for the deadline (clocks may differ a little)
    assert elapsed < TIMEOUT_BOUND, f"timeout_s 1 ended {elapsed:.3f} s after the start"


def check_cache(run: dict[str, Any], state: str, mode: str) -> None:
    """The platform document's cache note: a hit has the age of its entry, a miss none."""
    note = run["cache"]
    assert note is not None and (note["state"], note["mode"]) == (state, mode), note
    if state == "hit":
        assert (note["hits"], note["misses"]) == (1, 0)
        assert isinstance(note["age_s"], float) and note["age_s"] >= 0, note
    else:
        assert (note["hits"], note["misses"], note["age_s"]) == (0, 1, None), note


def check_not_cached(view: dict[str, Any]) -> None:
    """`cache: only` on a query never searched: the platform fails, nothing asked."""
    assert view["status"] == "failed", view
    (error,) = view["errors"]
    assert error["platform"] == "web_ok" and error["state"] == "failed"
    assert error["error"] == "web_ok: not cached", error
