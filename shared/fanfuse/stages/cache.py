"""The search cache: an identical (platform, query, options) within the TTL costs no provider call.

An entry is one query's answer from one platform, as the provider gave it (before the
post-filters, which run again on every use, so a time range stays relative to now). The key is
a hash of everything that shapes that answer: the platform's name and its non-secret settings,
the query, the language, whether content was asked for, and the options. The requested
`max_results` is not in the key: an entry answers any request for up to as many results as it
was searched for.

Only a query that succeeded is stored: a failed query, or a run that timed out or was cancelled
before its answer arrived, leaves nothing. The entries live in the task store (a SQLite table, a
Firestore collection with a TTL field), so every worker of a deployment shares them.

Scope: by default the key also holds the search's owner (the verified caller's subject), so an
entry serves only the owner who searched it. A shared entry would be an oracle: `cache: only`
answers at once, without a provider call, exactly when someone searched that query within the
TTL, so any caller could learn what other tenants search. A deployment whose callers are one
party may opt in to `FANFUSE_CACHE_SCOPE=shared`: fewer provider calls, at that price.
Searches with no owner (in-process: the embedded runtime, the Python API, the CLI) share one
scope: they are the one process's own user.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import BaseModel, SecretStr

from fanfuse.platforms.contract import PlatformSettings, SearchParams
from fanfuse.store.ports import CacheStore
from fanfuse.wire.errors import DocumentTooLarge
from fanfuse.wire.models import CacheEntry, Hit
from fanfuse.wire.options import CacheMode, SearchOptions

log = logging.getLogger(__name__)


_FINGERPRINTS: dict[int, tuple[BaseModel, str]] = {}
"""Fingerprints of the settings objects seen, by identity (each holds its object, so an id is
never reused for another): a platform's settings are read once per runtime, but fingerprinted
on every run (a dump and a hash, ~0.5 ms)."""
FINGERPRINTS_KEPT = 1024


def settings_fingerprint(settings: BaseModel) -> str:
    """A hash of the settings that shape answers; secrets left out (a key rotation keeps the
    entries, and no key ever reaches a cache document, even hashed). Settings are not changed
    once read, so an object's fingerprint is computed once."""
    known = _FINGERPRINTS.get(id(settings))
    if known is not None and known[0] is settings:
        return known[1]
    if len(_FINGERPRINTS) >= FINGERPRINTS_KEPT:
        _FINGERPRINTS.clear()
    fingerprint = _fingerprint(settings)
    _FINGERPRINTS[id(settings)] = (settings, fingerprint)
    return fingerprint


def _fingerprint(settings: BaseModel) -> str:
    shown = {
        name: value
        for name, value in settings.model_dump(mode="json").items()
        if not isinstance(getattr(settings, name, None), SecretStr)
    }
    return hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()


def cache_key(
    platform: str,
    fingerprint: str,
    query: str,
    *,
    language: str | None,
    include_content: bool,
    options: SearchOptions,
    scope: str | None = None,
) -> str:
    """`scope`: the owner whose entry this is (`cache_scope`); None: shared by every caller
    (such keys are the ones from before scopes, so a shared deployment keeps its entries)."""
    material = {
        "platform": platform,
        "settings": fingerprint,
        "query": query,
        "language": (language or "").lower(),
        "content": include_content,
        "options": options.key(),
    }
    if scope is not None:
        material["owner"] = scope
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:40]


def cache_scope(owner: str | None, shared: bool) -> str | None:
    """The scope of a search's entries: its owner's (in-process searches, with no owner, one
    scope of their own), or None when the deployment shares the cache across callers."""
    return None if shared else f"owner:{owner or ''}"


@dataclass(frozen=True)
class Cached:
    hits: list[Hit]
    age_s: float
    provider: str | None


class QueryCache:
    """One platform run's view of the cache: look a query up, store a query's answer."""

    def __init__(
        self,
        store: CacheStore,
        *,
        platform: str,
        fingerprint: str,
        language: str | None,
        include_content: bool,
        options: SearchOptions,
        limit: int,
        ttl_s: float,
        mode: CacheMode,
        clock: Callable[[], datetime],
        scope: str | None,
    ) -> None:
        self.store, self.platform, self.fingerprint = store, platform, fingerprint
        self.language, self.include_content, self.options = language, include_content, options
        self.limit, self.ttl_s, self.mode, self.clock = limit, ttl_s, mode, clock
        self.scope = scope
        self.deferred: list[CacheEntry] | None = None
        """A list: `save` adds its entries here, for the run's owner to write once the run has
        been counted (service/execute.py), off the path between the answer and its fan-in."""

    @classmethod
    def for_run(
        cls,
        store: CacheStore,
        platform: str,
        settings: PlatformSettings,
        params: SearchParams,
        mode: CacheMode,
        *,
        default_ttl_s: float,
        clock: Callable[[], datetime],
        scope: str | None,
    ) -> QueryCache:
        """The cache as one platform run uses it: its settings' fingerprint (another key or
        base URL is another cache) and TTL, else the deployment's `default_ttl_s`, within
        `scope` (`cache_scope`: the search's owner, unless the deployment shares)."""
        ttl = settings.cache_ttl
        return cls(
            store,
            platform=platform,
            fingerprint=settings_fingerprint(settings),
            language=params.language,
            include_content=params.include_content,
            options=params.options,
            limit=params.limit,
            ttl_s=default_ttl_s if ttl is None else ttl,
            mode=mode,
            clock=clock,
            scope=scope,
        )

    def key(self, query: str) -> str:
        return cache_key(
            self.platform,
            self.fingerprint,
            query,
            language=self.language,
            include_content=self.include_content,
            options=self.options,
            scope=self.scope,
        )

    def lookup(self, query: str) -> Cached | None:
        """A fresh entry that answers this many results; `bypass` never looks."""
        if self.mode is CacheMode.BYPASS or self.ttl_s <= 0:
            return None
        entry = self.store.get_cached(self.key(query))
        now = self.clock()
        if entry is None or entry.expires_at <= now or entry.limit < self.limit:
            return None
        age = max((now - entry.stored_at).total_seconds(), 0.0)
        hits = entry.hits[: self.limit]
        return Cached(hits=hits, age_s=round(age, 3), provider=entry.provider)

    def save(self, query: str, hits: list[Hit], provider: str | None) -> None:
        """Store one query's successful answer (never under `only`, which must not search)."""
        if self.ttl_s <= 0 or self.mode is CacheMode.ONLY:
            return
        now = self.clock()
        entry = CacheEntry(
            key=self.key(query),
            platform=self.platform,
            query=query,
            limit=self.limit,
            hits=[h.model_copy(update={"query_index": 0}) for h in hits],
            provider=provider,
            stored_at=now,
            expires_at=now + timedelta(seconds=self.ttl_s),
        )
        if self.deferred is not None:
            self.deferred.append(entry)
            return
        put(self.store, entry)


def put(store: CacheStore, entry: CacheEntry) -> None:
    """Write one entry; one too large for a document is not kept (page content can pass
    Firestore's 1 MiB)."""
    try:
        store.put_cached(entry)
    except DocumentTooLarge as exc:
        log.warning("not cached: %s", exc)
