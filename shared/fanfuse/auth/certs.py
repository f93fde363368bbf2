"""The issuers' public keys, fetched over HTTPS and cached per URL for as long as they say.

google-auth's `id_token.verify_token` fetches the certificate set on every call; a function
serving concurrent requests must not. `CertCache` keeps one key set per URL:

- fresh for the answer's `Cache-Control: max-age` (Google's is hours), bounded to
  [MIN_INTERVAL, MAX_AGE] so that a rotated key is seen within the hour and no issuer can make
  us fetch on every request; DEFAULT_AGE when the answer gives none;
- a token signed with a key id the set does not hold refetches it once (key rotation: Google
  publishes a new key before signing with it), but never more often than MIN_INTERVAL, so forged
  key ids cannot turn requests into fetches;
- one lock per URL: concurrent misses wait for a single fetch instead of each making one;
- a failed fetch is not retried for RETRY_INTERVAL: until then every verification that needs the
  set is answered from what is held, or refused at once (CertsUnavailable) when nothing is, so
  an issuer that is down (or slow: FETCH_TIMEOUT each) costs one fetch per interval, not one per
  request. The attempts of one URL, successful or not, are at least MIN_INTERVAL apart;
- while a refresh fails, the last good set keeps verifying for up to MAX_STALE past its
  freshness (Google publishes a key days before it signs with it and keeps it for days after),
  so an outage of the issuer's endpoint is not an outage of every caller with a valid token.

Both formats Google publishes are read: `{kid: x509 PEM}` (oauth2/v1/certs, Firebase's
securetoken endpoint) and a JWK set (oauth2/v3/certs), whose RSA keys become PEM public keys, so
google-auth verifies either the same way.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

MAX_AGE = 3600.0
"""Longest a key set is trusted without asking again (seconds)."""
DEFAULT_AGE = 300.0
"""How long a key set is kept when its answer gives no max-age."""
MIN_INTERVAL = 10.0
"""Shortest time between two fetches of one URL, whatever happens (refetch on unknown kid)."""
RETRY_INTERVAL = 30.0
"""After a failed fetch, how long before the next attempt (requests meanwhile use what is held)."""
MAX_STALE = 6 * 3600.0
"""How long past its freshness a key set may still verify while every refresh fails."""
FETCH_TIMEOUT = 5.0

MAX_AGE_DIRECTIVE = re.compile(r"(?:^|[,\s])max-age\s*=\s*\"?(\d+)", re.IGNORECASE)

Fetch = Callable[[str], tuple[object, str | None]]
"""One GET of a certificate URL: (the decoded JSON, the Cache-Control header or None)."""


class CertsUnavailable(Exception):
    """The key set could not be fetched or read: the issuer's problem, not the caller's."""


def cache_seconds(cache_control: str | None) -> float:
    """How long to keep a key set: its max-age, within [MIN_INTERVAL, MAX_AGE].

    The lower bound keeps an issuer answering `max-age=0` (or `no-cache`) from costing one
    fetch per request; the upper bound makes a revoked key disappear within the hour.
    """
    found = MAX_AGE_DIRECTIVE.search(cache_control or "")
    age = float(found.group(1)) if found else DEFAULT_AGE
    return min(max(age, MIN_INTERVAL), MAX_AGE)


def _b64_int(value: object) -> int:
    if not isinstance(value, str):
        raise ValueError("not a base64url string")
    return int.from_bytes(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)), "big")


def _jwk_pem(key: dict[str, object]) -> str:
    """An RSA JWK (`n`, `e`) as a PEM public key, which google-auth's RSAVerifier reads."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    public = rsa.RSAPublicNumbers(_b64_int(key.get("e")), _b64_int(key.get("n"))).public_key()
    pem = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return pem.decode()


def _rsa_signing_key(jwk: object) -> tuple[str, dict[str, object]] | None:
    """(kid, key) of a JWK usable here (RSA, for signatures, with a kid), or None to skip it."""
    if not isinstance(jwk, dict) or jwk.get("kty") != "RSA" or jwk.get("use", "sig") != "sig":
        return None
    kid = jwk.get("kid")
    return (kid, jwk) if isinstance(kid, str) and kid else None


def keys_of(document: object) -> dict[str, str]:
    """kid -> PEM (certificate or public key) from either published format.

    JWK entries that are not RSA signing keys are left out (google-auth verifies RS256 here).
    Raises CertsUnavailable for anything else: a key set we cannot read verifies nothing.
    """
    if isinstance(document, dict) and isinstance(document.get("keys"), list):
        keys = {}
        for kid, jwk in filter(None, map(_rsa_signing_key, document["keys"])):
            try:
                keys[kid] = _jwk_pem(jwk)
            except ValueError:
                raise CertsUnavailable(f"JWK {kid!r} is not a valid RSA key") from None
        return keys
    if isinstance(document, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in document.items()
    ):
        return dict(document)
    raise CertsUnavailable("neither {kid: certificate} nor a JWK set")


def fetch(url: str) -> tuple[object, str | None]:
    """GET the key set (no redirects: the URL is configuration, and answers there or not).

    httpx is imported here, not at the top: every public function imports this module, and only a
    call that verifies a token (and misses the cache) needs it, so a cold start skips ~0.1 s."""
    import httpx

    try:
        response = httpx.get(url, timeout=FETCH_TIMEOUT)
    except httpx.HTTPError as exc:
        raise CertsUnavailable(f"{url} could not be reached ({type(exc).__name__})") from None
    if response.status_code != 200:
        raise CertsUnavailable(f"{url} answered {response.status_code}")
    try:
        return response.json(), response.headers.get("Cache-Control")
    except ValueError:
        raise CertsUnavailable(f"{url} answered something other than JSON") from None


@dataclass(frozen=True)
class _KeySet:
    keys: dict[str, str]
    fresh_until: float


@dataclass
class _Source:
    """One URL: its last good set, and when it was last asked (and how that went)."""

    held: _KeySet | None = None
    attempted_at: float | None = None
    failure: str | None = None
    """Why the last attempt failed; None: it succeeded (or none was made)."""


def may_fetch(source: _Source, now: float) -> bool:
    """Whether a fetch may be made now: none yet, else MIN_INTERVAL since the last attempt,
    RETRY_INTERVAL when it failed."""
    if source.attempted_at is None:
        return True
    wait = RETRY_INTERVAL if source.failure is not None else MIN_INTERVAL
    return now - source.attempted_at >= wait


def wants_fetch(held: _KeySet | None, kid: str, now: float) -> bool:
    """Whether the set must be asked again for `kid`: none held, stale, or `kid` unknown."""
    return held is None or now >= held.fresh_until or kid not in held.keys


def usable(held: _KeySet, now: float) -> bool:
    """Whether a held set may still verify: fresh, or stale by less than MAX_STALE."""
    return now < held.fresh_until + MAX_STALE


class CertCache:
    """Key sets per URL, thread-safe; `fetch` and `clock` are there for tests."""

    def __init__(self, fetch: Fetch = fetch, clock: Callable[[], float] = time.monotonic) -> None:
        self._fetch = fetch
        self._clock = clock
        self._sources: dict[str, _Source] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def key(self, url: str, kid: str) -> str | None:
        """The PEM for `kid` published at `url`, fetching only when the set is stale or the kid
        unknown, and the rate allows it (`may_fetch`). None: no such key.

        Raises CertsUnavailable when no usable set is held and none can be fetched now (the
        fetch failed, or one failed less than RETRY_INTERVAL ago).
        """
        with self._lock(url):
            now = self._clock()
            source = self._source(url)
            if wants_fetch(source.held, kid, now) and may_fetch(source, now):
                self._refresh(url, source, now)
            held = source.held
            if held is None or not usable(held, now):
                raise CertsUnavailable(source.failure or f"{url}: no key set held")
            return held.keys.get(kid)

    def _refresh(self, url: str, source: _Source, now: float) -> None:
        """One fetch; a failure is recorded (and logged), the set held stays."""
        source.attempted_at = now
        try:
            document, cache_control = self._fetch(url)
            keys = keys_of(document)
        except CertsUnavailable as exc:
            source.failure = str(exc)
            log.warning("key set fetch failed, next try in %.0f s: %s", RETRY_INTERVAL, exc)
            return
        source.held = _KeySet(keys, now + cache_seconds(cache_control))
        source.failure = None

    def _source(self, url: str) -> _Source:
        with self._guard:
            return self._sources.setdefault(url, _Source())

    def _lock(self, url: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(url, threading.Lock())

    def clear(self) -> None:
        with self._guard:
            self._sources.clear()


CERTS = CertCache()
"""This process's key sets, shared by every request thread."""
