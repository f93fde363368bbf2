"""The search cache's rules: what makes two searches identical, freshness, limits, modes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import SecretStr

from fanfuse.platforms.contract import PlatformSettings
from fanfuse.stages.cache import QueryCache, cache_key, cache_scope, settings_fingerprint
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.errors import DocumentTooLarge
from fanfuse.wire.models import CacheEntry, Hit
from fanfuse.wire.options import CacheMode, SearchOptions

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


class KeyedSettings(PlatformSettings):
    api_key: SecretStr
    region: str = "eu"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def make(
    store: SqliteStore,
    clock: Clock,
    *,
    limit: int = 10,
    mode: CacheMode = CacheMode.AUTO,
    ttl: float = 600,
    options: SearchOptions | None = None,
    scope: str | None = None,
) -> QueryCache:
    return QueryCache(
        store,
        platform="web",
        fingerprint="f",
        language=None,
        include_content=False,
        options=options or SearchOptions(),
        limit=limit,
        ttl_s=ttl,
        mode=mode,
        clock=clock,
        scope=scope,
    )


def answer(n: int) -> list[Hit]:
    return [Hit(url=f"https://a.org/{i}", title=str(i), query_index=3) for i in range(n)]


def test_an_entry_is_served_with_its_age_until_the_ttl() -> None:
    store, clock = SqliteStore(":memory:"), Clock()
    make(store, clock).save("q", answer(10), provider="perplexity")
    clock.now = T0 + timedelta(seconds=42)
    cached = make(store, clock).lookup("q")
    assert cached is not None
    assert cached.age_s == 42 and cached.provider == "perplexity"
    assert [h.url for h in cached.hits] == [h.url for h in answer(10)]
    assert {h.query_index for h in cached.hits} == {0}
    clock.now = T0 + timedelta(seconds=600)
    assert make(store, clock).lookup("q") is None


def test_an_entry_serves_smaller_requests_only() -> None:
    store, clock = SqliteStore(":memory:"), Clock()
    make(store, clock, limit=10).save("q", answer(10), provider=None)
    small = make(store, clock, limit=3).lookup("q")
    assert small is not None and len(small.hits) == 3
    assert make(store, clock, limit=20).lookup("q") is None


def test_bypass_never_reads_but_refreshes_and_only_never_writes() -> None:
    store, clock = SqliteStore(":memory:"), Clock()
    make(store, clock).save("q", answer(2), provider=None)
    assert make(store, clock, mode=CacheMode.BYPASS).lookup("q") is None
    clock.now = T0 + timedelta(seconds=30)
    make(store, clock, mode=CacheMode.BYPASS).save("q", answer(3), provider=None)
    fresh = make(store, clock).lookup("q")
    assert fresh is not None and fresh.age_s == 0 and len(fresh.hits) == 3
    make(store, clock, mode=CacheMode.ONLY).save("other", answer(1), provider=None)
    assert make(store, clock, mode=CacheMode.ONLY).lookup("other") is None


def test_a_zero_ttl_disables_the_cache() -> None:
    store, clock = SqliteStore(":memory:"), Clock()
    make(store, clock, ttl=0).save("q", answer(1), provider=None)
    assert make(store, clock).lookup("q") is None


def test_options_are_part_of_the_key_in_a_canonical_order() -> None:
    def key(options: SearchOptions, query: str = "q", language: str | None = None) -> str:
        return cache_key(
            "web", "f", query, language=language, include_content=False, options=options
        )

    both = SearchOptions(include_domains=["a.org", "b.org"])
    assert key(both) == key(SearchOptions(include_domains=["b.org", "a.org"]))
    assert key(both) != key(SearchOptions(include_domains=["a.org"]))
    assert key(SearchOptions()) != key(both)
    assert key(SearchOptions(), language="EN") == key(SearchOptions(), language="en")
    assert key(SearchOptions(), query="Q") != key(SearchOptions())
    assert cache_key(
        "web", "f", "q", language=None, include_content=True, options=SearchOptions()
    ) != key(SearchOptions())


def test_the_fingerprint_follows_settings_but_not_secrets() -> None:
    a = KeyedSettings(api_key=SecretStr("k1"))
    rotated = KeyedSettings(api_key=SecretStr("k2"))
    moved = KeyedSettings(api_key=SecretStr("k1"), region="us")
    assert settings_fingerprint(a) == settings_fingerprint(rotated)
    assert settings_fingerprint(a) != settings_fingerprint(moved)
    assert "k1" not in settings_fingerprint(a)


def test_expired_entries_are_purged_with_the_tasks() -> None:
    store, clock = SqliteStore(":memory:"), Clock()
    make(store, clock, ttl=10).save("q", answer(1), provider=None)
    key = make(store, clock).key("q")
    assert store.get_cached(key) is not None
    store.purge_expired(T0 + timedelta(seconds=11))
    assert store.get_cached(key) is None


class TooLargeStore(SqliteStore):
    """A store that refuses every entry, as Firestore refuses a document over 1 MiB."""

    def put_cached(self, entry: CacheEntry) -> None:
        raise DocumentTooLarge(f"cache/{entry.key} would be 2000000 bytes")


def test_an_entry_too_large_to_store_is_skipped_not_an_error() -> None:
    store, clock = TooLargeStore(":memory:"), Clock()
    make(store, clock).save("q", answer(1), provider=None)
    assert make(store, clock).lookup("q") is None


def test_an_owners_entry_serves_only_that_owner_unless_the_deployment_shares() -> None:
    """`cache: only` must not tell owner B that owner A searched this query: B's lookup in its
    own scope misses, while A's hits; a deployment that opts in to sharing serves both."""
    store, clock = SqliteStore(":memory:"), Clock()
    alice, bob = cache_scope("alice", shared=False), cache_scope("bob", shared=False)
    make(store, clock, scope=alice).save("secret plans", answer(2), provider=None)
    assert make(store, clock, scope=bob, mode=CacheMode.ONLY).lookup("secret plans") is None
    assert make(store, clock, scope=cache_scope(None, shared=False)).lookup("secret plans") is None
    assert make(store, clock, scope=alice, mode=CacheMode.ONLY).lookup("secret plans") is not None

    shared = cache_scope("alice", shared=True)
    assert shared is None and shared == cache_scope("bob", shared=True)
    make(store, clock, scope=shared).save("public", answer(2), provider=None)
    assert make(store, clock, scope=cache_scope("bob", shared=True)).lookup("public") is not None


def test_the_owner_is_part_of_the_key_unless_shared() -> None:
    def key(scope: str | None) -> str:
        return cache_key(
            "web", "f", "q", language=None, include_content=False, options=SearchOptions(),
            scope=scope,
        )  # fmt: skip

    a, b = cache_scope("a", shared=False), cache_scope("b", shared=False)
    assert len({key(a), key(b), key(cache_scope(None, shared=False)), key(None)}) == 4
    assert key(cache_scope("a", shared=True)) == key(cache_scope("b", shared=True)) == key(None)
