"""Per-request options end to end on the local cloud stack, over HTTP.

The same scenarios as tests/integration/test_embedded_options.py (the embedded runtime), from
tests/support/option_scenarios.py; here the platform documents are read from Firestore itself.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from fanfuse.store.firestore import CACHE_SUFFIX
from fanfuse.store.firestore_codec import decode
from fanfuse.wire.models import CacheEntry
from tests.support import option_scenarios as sc
from tests.support.e2e.cloud import Cloud


def search(e2e: Cloud, payload: dict[str, Any]) -> dict[str, Any]:
    return e2e.wait(e2e.start(payload))


def stored_at(e2e: Cloud, query: str) -> datetime:
    """When the cache entry for `query` was written, read from its Firestore document."""
    docs = e2e.db.collection(e2e.store.collection + CACHE_SUFFIX).stream()
    entries = [CacheEntry.model_validate(decode(d.to_dict())) for d in docs]
    (entry,) = [e for e in entries if e.query == query]
    return entry.stored_at


def test_a_query_that_fails_is_listed_and_the_search_is_partial(e2e: Cloud) -> None:
    view = search(e2e, sc.MULTI_QUERY)
    sc.check_multi_query(view, e2e.platform_doc(view["task_id"], "web_flaky"))


def test_domain_filters_over_three_platforms(e2e: Cloud) -> None:
    view = search(e2e, sc.DOMAINS)
    docs = {name: e2e.platform_doc(view["task_id"], name) for name in sc.REMOVED}
    sc.check_domains(view, docs)
    assert e2e.task_doc(view["task_id"])["filtered"] == view["filtered"]


def test_timeout_s_finalizes_with_what_arrived(e2e: Cloud) -> None:
    # Warm the functions first: a process's first request imports what it serves, a one-off
    # cost (seconds for a cold worker) that the bound is not about.
    assert search(e2e, {"query": "warm-up", "platform": "web_ok", "cache": "bypass"})
    started = time.perf_counter()
    accepted = e2e.start(sc.TIMEOUT)
    view = e2e.wait(accepted, timeout=30)  # polls every 0.05 s (sc.POLL)
    elapsed = time.perf_counter() - started
    doc = e2e.task_doc(accepted["task_id"])
    late = (doc["finalized_at"] - doc["deadline_at"]).total_seconds()
    print(f"\nemulator: timeout_s 1 ended {elapsed:.3f} s after the start ({late:.3f} s late)")
    sc.check_timeout(view, elapsed)


def test_a_repeated_search_is_served_from_the_cache(e2e: Cloud) -> None:
    payload = {"query": "cached query", "platform": ["web_ok"]}
    first = search(e2e, payload)
    sc.check_cache(e2e.platform_doc(first["task_id"], "web_ok"), "miss", "auto")
    assert e2e.stub.requests["delay/0"] == 1
    stored = stored_at(e2e, "cached query")

    again = search(e2e, payload)
    assert e2e.stub.requests["delay/0"] == 1  # not asked again
    sc.check_cache(e2e.platform_doc(again["task_id"], "web_ok"), "hit", "auto")
    assert again["status"] == "completed"
    assert [r["url"] for r in again["results"]] == [r["url"] for r in first["results"]]

    time.sleep(sc.REWRITE_GAP)  # Firestore rewrites an entry at most once a second
    fresh = search(e2e, {**payload, "cache": "bypass"})
    assert e2e.stub.requests["delay/0"] == 2  # asked again
    sc.check_cache(e2e.platform_doc(fresh["task_id"], "web_ok"), "miss", "bypass")
    assert stored_at(e2e, "cached query") > stored  # and the entry refreshed

    never = search(e2e, {"query": "never seen", "platform": ["web_ok"], "cache": "only"})
    sc.check_not_cached(never)
    assert e2e.stub.requests["delay/0"] == 2
