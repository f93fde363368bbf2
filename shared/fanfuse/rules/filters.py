"""The post-filters: the request's domain and time options enforced on a platform's results.

Pure. The searching stage runs them on every platform's lists, whatever the provider did:
- domains always, exactly (a domain matches itself and its subdomains), because a provider's
  own filter may be looser (a prefix match, a cap on the number of domains) and the request's
  contract is exact; what the provider let through and the filter removed is counted;
- the time range only where the provider has no native parameter (its notion of "a week" is
  the provider's to apply), and only on results that carry a date: an undated result is kept,
  since dropping it would punish providers that do not report dates;
- country and safe search cannot be checked on a result: not applied, and said so.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from fanfuse.wire.models import Hit, as_utc
from fanfuse.wire.options import (
    POST_FILTERABLE,
    Applied,
    OptionName,
    OptionUse,
    SearchOptions,
    domain_matches,
    normalize_domain,
)


@dataclass(frozen=True)
class Filtered:
    lists: list[list[Hit]]
    uses: dict[str, OptionUse]
    """Per option the request set: how it was applied and how many results it removed."""


def host_of(url: str) -> str | None:
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    return normalize_domain(host) if host else None


def _in(host: str | None, domains: Collection[str]) -> bool:
    return host is not None and any(domain_matches(host, d) for d in domains)


def _removes(name: OptionName, hit: Hit, options: SearchOptions, cutoff: datetime | None) -> bool:
    if name is OptionName.INCLUDE_DOMAINS:
        return not _in(host_of(hit.url), options.include_domains)
    if name is OptionName.EXCLUDE_DOMAINS:
        return _in(host_of(hit.url), options.exclude_domains)
    if name is OptionName.TIME_RANGE and cutoff is not None and hit.published_at is not None:
        return as_utc(hit.published_at) < cutoff
    return False


def post_filter(
    lists: list[list[Hit]],
    options: SearchOptions,
    native: Collection[OptionName],
    now: datetime,
) -> Filtered:
    """`lists` (one per query) with the results the options exclude removed, and the record.

    A result removed by one filter is counted against the first that removes it, in
    `OptionName` order, so the counts add up to the results removed.
    """
    given = options.given()
    active = [
        name
        for name in OptionName
        if name in given
        and name in POST_FILTERABLE
        and (name is not OptionName.TIME_RANGE or name not in native)
    ]
    cutoff = now - timedelta(days=options.time_range.days) if options.time_range else None
    removed = dict.fromkeys(active, 0)
    kept_lists: list[list[Hit]] = []
    for hits in lists:
        kept: list[Hit] = []
        for hit in hits:
            culprit = next((n for n in active if _removes(n, hit, options, cutoff)), None)
            if culprit is None:
                kept.append(hit)
            else:
                removed[culprit] += 1
        kept_lists.append(kept)
    uses: dict[str, OptionUse] = {}
    for name in OptionName:
        if name not in given:
            continue
        if name in native:
            applied = Applied.NATIVE
        elif name in POST_FILTERABLE:
            applied = Applied.POST_FILTER
        else:
            applied = Applied.NOT_APPLIED
        uses[name.value] = OptionUse(applied=applied, removed=removed.get(name, 0))
    return Filtered(lists=kept_lists, uses=uses)
