"""URL forms: the clean URL a result shows, the key two URLs of one page share, the site's domain.

Clean URL (`clean_url`; what a result displays and the resolving stage returns, still a URL
that names the page exactly as it was served):
- scheme and host lower-cased, IDN hosts to punycode, default ports (:80 for http, :443 for
  https) removed, percent-encoding and dot segments normalized (url-normalize);
- the fragment (`#...`) removed;
- tracking parameters removed: every `utm_*` parameter and the names in TRACKING_PARAMS;
- the remaining query parameters sorted (by name, then value), keeping blank values.
The path is kept as given, trailing slash included: `/a/` and `/a` may be served differently.

Canonical URL (`canonical_url`; the dedup key, never fetched): the clean URL, and also
- a trailing slash removed from a non-root path (`/a/b/` -> `/a/b`; `/` stays);
- `http` folded into `https`: the same path on both schemes is one page. The key is not a
  fetchable URL (the displayed one is chosen among the URLs the platforms gave, preferring
  https, see dedup.py), so folding costs nothing but the risk below;
- one leading `www.` or `m.` label dropped from the host (`www.example.org`, `m.example.org`
  and `example.org` are one site), unless what remains is a public suffix (`www.co.uk` stays).

The risk of the folding: a site whose `www.` or `m.` host (or whose http and https) serves
different content from the bare host, or whose bare host is another service altogether. That
was common twenty years ago and is rare now: today's sites redirect one to the other, and
search engines index one of them. When it happens, two different pages with the same path
merge into one result whose `variants` still list both URLs.

Registered domain (`registered_domain`): the host's public suffix plus one label, from the
Public Suffix List that `publicsuffixlist` bundles (it never fetches); None for IP addresses,
non-web schemes and hosts under a suffix the list does not know (`localhost`, `*.local`,
`*.internal`), where nobody can say which hosts belong to one owner.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from publicsuffixlist import PublicSuffixList
from url_normalize import url_normalize

TRACKING_PARAMS = frozenset(
    {
        "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "fbclid", "msclkid", "yclid",
        "twclid", "ttclid", "li_fat_id", "igshid", "mc_cid", "mc_eid", "_hsenc", "_hsmi",
        "mkt_tok", "vero_id", "oly_anon_id", "oly_enc_id", "rb_clickid", "s_cid",
        "spm", "scm", "ref_src", "ref_url",
    }
)  # fmt: skip

FOLDED_HOST_PREFIXES = ("www.", "m.")
"""Leading host labels that name the same site as the bare host (see the module docstring)."""

WEB_SCHEMES = frozenset({"http", "https"})


@functools.cache
def _psl() -> PublicSuffixList:
    """The bundled list, parsed on first use (about 60 ms) rather than at import."""
    return PublicSuffixList()


def _is_tracking(name: str) -> bool:
    lowered = name.lower()
    return lowered.startswith("utm_") or lowered in TRACKING_PARAMS


URL_MEMO = 65_536
"""URLs whose clean and canonical forms a process remembers. Both are pure and url-normalize
(IDNA checks included) takes about 0.1 ms a URL: fusion asks for each result's forms several
times, and every status read of a running search fuses its preview again."""


@functools.lru_cache(maxsize=URL_MEMO)
def clean_url(url: str) -> str:
    """The URL without tracking, fragment or spelling noise (see the module docstring)."""
    normalized = url_normalize(url.strip()) or url.strip()
    parts = urlsplit(normalized)
    query = sorted(
        (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _is_tracking(k)
    )
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def bare_host(host: str) -> str:
    """`host` without one leading `www.` or `m.`, unless that would leave a public suffix."""
    for prefix in FOLDED_HOST_PREFIXES:
        if host.startswith(prefix):
            rest = host[len(prefix) :]
            if "." in rest and _psl().privatesuffix(rest) is not None:
                return rest
            return host
    return host


@functools.lru_cache(maxsize=URL_MEMO)
def canonical_url(url: str) -> str:
    """The key two URLs share when they name the same page (see the module docstring)."""
    parts = urlsplit(clean_url(url))
    path = parts.path
    if len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/") or "/"
    if parts.scheme not in WEB_SCHEMES or not parts.hostname:
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
    userinfo, at, hostport = parts.netloc.rpartition("@")
    dropped = len(parts.hostname) - len(bare_host(parts.hostname))
    netloc = userinfo + at + hostport[dropped:]  # clean_url lower-cased the host: it leads
    return urlunsplit(("https", netloc, path, parts.query, ""))


def content_id(url: str) -> str:
    """Stable id of a result's page, used for `searches/{task}/contents/{id}`.

    Built on the canonical URL, so the http and `www.` spellings of a page share one id.
    """
    return hashlib.sha256(canonical_url(url).encode()).hexdigest()[:24]


def registered_domain(url: str) -> str | None:
    """The site's registered domain (`news.bbc.co.uk` -> `bbc.co.uk`), or None when unknown."""
    parts = urlsplit(url)
    host = parts.hostname
    if parts.scheme.lower() not in WEB_SCHEMES or not host:
        return None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return None
    domain = _psl().privatesuffix(host.lower(), accept_unknown=False)
    return domain if isinstance(domain, str) else None


def is_mobile_host(url: str) -> bool:
    """Whether the URL's host starts with `m.`: a rendering for phones, shown as a last resort."""
    host = urlsplit(url).hostname or ""
    return host.startswith("m.")
