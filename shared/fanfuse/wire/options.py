"""Per-search options: what a request may ask of every platform, and how each one was honoured.

A request carries domain filters, a time range, a country and a safe-search level. Platforms map
each to their provider's native parameter where the provider has one (`Platform.native`); where
it has none, the searching stage filters the results afterwards (domains exactly, time only for
results that carry a date), and an option no filter can enforce (country, safe search) is
recorded as not applied. A platform is never dropped for an option it cannot honour: the
platform document says, per option, how it was applied and how many results it removed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MAX_DOMAINS = 20


class TimeRange(StrEnum):
    DAY = "day"
    WEEK = "week"
    MONTH = "month"
    YEAR = "year"

    @property
    def days(self) -> int:
        """The range as days back from now: what the post-filter and day-based APIs use."""
        return {"day": 1, "week": 7, "month": 31, "year": 366}[self.value]


class SafeSearch(StrEnum):
    OFF = "off"
    MODERATE = "moderate"
    STRICT = "strict"


class CacheMode(StrEnum):
    """`auto`: answer from a fresh entry, else search and store; `bypass`: search and refresh
    the entry; `only`: answer from the cache alone (a miss fails that platform: `not cached`)."""

    AUTO = "auto"
    BYPASS = "bypass"
    ONLY = "only"


class OptionName(StrEnum):
    INCLUDE_DOMAINS = "include_domains"
    EXCLUDE_DOMAINS = "exclude_domains"
    TIME_RANGE = "time_range"
    COUNTRY = "country"
    SAFESEARCH = "safesearch"


POST_FILTERABLE = frozenset(
    {OptionName.INCLUDE_DOMAINS, OptionName.EXCLUDE_DOMAINS, OptionName.TIME_RANGE}
)
"""The options the pipeline can enforce on results: country and safe search it cannot."""


class SearchOptions(BaseModel):
    """The request's options as the platforms see them (validated on `SearchRequest`)."""

    model_config = ConfigDict(frozen=True)

    include_domains: list[str] = Field(default_factory=list)
    exclude_domains: list[str] = Field(default_factory=list)
    time_range: TimeRange | None = None
    country: str | None = Field(default=None, description="ISO 3166-1 alpha-2, upper case")
    safesearch: SafeSearch | None = None

    def given(self) -> frozenset[OptionName]:
        """The options the request set (an empty domain list is not set)."""
        return frozenset(name for name in OptionName if getattr(self, name.value))

    def split_domains(self) -> tuple[SearchOptions, SearchOptions]:
        """(these options without the domain filters, the domain filters alone)."""
        without = self.model_copy(update={"include_domains": [], "exclude_domains": []})
        only = SearchOptions(
            include_domains=self.include_domains, exclude_domains=self.exclude_domains
        )
        return without, only

    def key(self) -> dict[str, Any]:
        """A canonical form for cache keys: sorted domain lists, unset options left out."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        for name in ("include_domains", "exclude_domains"):
            if name in data:
                data[name] = sorted(data[name])
        return data


class Applied(StrEnum):
    NATIVE = "native"
    POST_FILTER = "post_filter"
    NOT_APPLIED = "not_applied"


class OptionUse(BaseModel):
    """How one option was honoured by one platform run."""

    applied: Applied
    removed: int = Field(default=0, description="results the post-filter removed")


# ISO 3166-1 alpha-2: the 249 officially assigned codes.
COUNTRIES = frozenset(
    {
        "AD", "AE", "AF", "AG", "AI", "AL", "AM", "AO", "AQ", "AR", "AS", "AT", "AU", "AW", "AX",
        "AZ", "BA", "BB", "BD", "BE", "BF", "BG", "BH", "BI", "BJ", "BL", "BM", "BN", "BO", "BQ",
        "BR", "BS", "BT", "BV", "BW", "BY", "BZ", "CA", "CC", "CD", "CF", "CG", "CH", "CI", "CK",
        "CL", "CM", "CN", "CO", "CR", "CU", "CV", "CW", "CX", "CY", "CZ", "DE", "DJ", "DK", "DM",
        "DO", "DZ", "EC", "EE", "EG", "EH", "ER", "ES", "ET", "FI", "FJ", "FK", "FM", "FO", "FR",
        "GA", "GB", "GD", "GE", "GF", "GG", "GH", "GI", "GL", "GM", "GN", "GP", "GQ", "GR", "GS",
        "GT", "GU", "GW", "GY", "HK", "HM", "HN", "HR", "HT", "HU", "ID", "IE", "IL", "IM", "IN",
        "IO", "IQ", "IR", "IS", "IT", "JE", "JM", "JO", "JP", "KE", "KG", "KH", "KI", "KM", "KN",
        "KP", "KR", "KW", "KY", "KZ", "LA", "LB", "LC", "LI", "LK", "LR", "LS", "LT", "LU", "LV",
        "LY", "MA", "MC", "MD", "ME", "MF", "MG", "MH", "MK", "ML", "MM", "MN", "MO", "MP", "MQ",
        "MR", "MS", "MT", "MU", "MV", "MW", "MX", "MY", "MZ", "NA", "NC", "NE", "NF", "NG", "NI",
        "NL", "NO", "NP", "NR", "NU", "NZ", "OM", "PA", "PE", "PF", "PG", "PH", "PK", "PL", "PM",
        "PN", "PR", "PS", "PT", "PW", "PY", "QA", "RE", "RO", "RS", "RU", "RW", "SA", "SB", "SC",
        "SD", "SE", "SG", "SH", "SI", "SJ", "SK", "SL", "SM", "SN", "SO", "SR", "SS", "ST", "SV",
        "SX", "SY", "SZ", "TC", "TD", "TF", "TG", "TH", "TJ", "TK", "TL", "TM", "TN", "TO", "TR",
        "TT", "TV", "TW", "TZ", "UA", "UG", "UM", "US", "UY", "UZ", "VA", "VC", "VE", "VG", "VI",
        "VN", "VU", "WF", "WS", "YE", "YT", "ZA", "ZM", "ZW",
    }
)  # fmt: skip


def domain_problem(value: str) -> str | None:
    """Why `value` is not a bare host name (None: it is one), for a 400 that names it."""
    if "://" in value:
        return f"{value!r} has a scheme; give the host name only (e.g. example.org)"
    if any(c in value for c in "/?#@"):
        return f"{value!r} has a path or query; give the host name only (e.g. example.org)"
    if ":" in value:
        return f"{value!r} has a port; give the host name only"
    labels = value.split(".")
    if len(value) > 253 or not all(labels):
        return f"{value!r} is not a host name"
    for label in labels:
        if len(label) > 63 or label.startswith("-") or label.endswith("-"):
            return f"{value!r} is not a host name"
        if not all(c.isalnum() or c == "-" for c in label):
            return f"{value!r} is not a host name"
    return None


def normalize_domain(value: str) -> str:
    """Lower case, no trailing dot, international names as punycode (what URLs carry)."""
    host = value.strip().rstrip(".").lower()
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def domain_matches(host: str, domain: str) -> bool:
    """A domain matches itself and its subdomains: `example.org` matches `news.example.org`."""
    return host == domain or host.endswith("." + domain)
