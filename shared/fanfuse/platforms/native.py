"""What request builders share when they map a search's options onto a provider's parameters.

Two rules hold for every platform, so they live here once:
- a request option overrides the platform's environment setting for the same thing, and the
  setting stays the default when the request leaves the option unset (`chosen`); when the
  request sets an option the provider cannot take in that form (a country it does not list),
  the setting is not sent either, since it would ask for something the request did not;
- a time range counts back from `params.now`, the search's own time, never from the clock, so
  request builders stay pure and a test can pin the date (`since`).

Which options a builder maps is declared next to it (`Platform.native`, `native_options`); the
searching stage post-filters or records the rest (see `fanfuse.rules.filters`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TypeVar

from fanfuse.platforms.contract import SearchParams
from fanfuse.wire.models import as_utc
from fanfuse.wire.options import OptionName, SearchOptions

T = TypeVar("T")
D = TypeVar("D")


def chosen(options: SearchOptions, name: OptionName, mapped: T | None, default: D) -> T | D | None:
    """`mapped` (the request's value in the provider's form, None when it has none) when the
    request set `name`, else the platform's setting `default`."""
    return mapped if name in options.given() else default


def domains(
    options: SearchOptions, include: list[str] | None, exclude: list[str] | None
) -> tuple[list[str] | None, list[str] | None]:
    """(included, excluded) domains to send: the request's lists, else the settings' defaults."""
    return (
        chosen(options, OptionName.INCLUDE_DOMAINS, options.include_domains, include),
        chosen(options, OptionName.EXCLUDE_DOMAINS, options.exclude_domains, exclude),
    )


def now_utc(params: SearchParams) -> datetime:
    """The search's time as an aware UTC datetime (a naive one is read as UTC)."""
    return as_utc(params.now).astimezone(UTC)


def since(params: SearchParams) -> datetime | None:
    """The start of the request's time range in UTC, None when it set none.

    The range is `TimeRange.days` back from the search's time, the same span the post-filter
    uses for providers without a date parameter, so both ways of applying it agree.
    """
    time_range = params.options.time_range
    if time_range is None:
        return None
    return now_utc(params) - timedelta(days=time_range.days)
