"""`base_url` is the API root for every HTTP platform; the older full-endpoint spelling works."""

from __future__ import annotations

from typing import Any

import pytest

from fanfuse.platforms import BUILTIN, load_engine
from fanfuse.platforms.http_api import HttpPlatform, endpoint_url


@pytest.mark.parametrize(
    ("base", "path", "url"),
    [
        (
            "https://www.googleapis.com",
            "/customsearch/v1",
            "https://www.googleapis.com/customsearch/v1",
        ),
        (
            "https://proxy.local/google/",
            "/customsearch/v1",
            "https://proxy.local/google/customsearch/v1",
        ),
        ("http://h/customsearch/v1", "/customsearch/v1", "http://h/customsearch/v1"),
        ("https://api.linkup.so/v1", "/v1/search", "https://api.linkup.so/v1/search"),
        ("https://api.linkup.so", "/v1/search", "https://api.linkup.so/v1/search"),
        ("http://h/res/v1/web/search", "/res/v1/web/search", "http://h/res/v1/web/search"),
        ("https://searx.example.org/", "/search", "https://searx.example.org/search"),
        ("https://{lang}.wikipedia.org", "/w/api.php", "https://{lang}.wikipedia.org/w/api.php"),
    ],
)
def test_endpoint_url(base: str, path: str, url: str) -> None:
    assert endpoint_url(base, path) == url


def http_platforms() -> list[HttpPlatform[Any]]:
    found = []
    for engine in BUILTIN:
        try:
            platform = load_engine(engine)
        except ImportError:
            continue
        if isinstance(platform, HttpPlatform):
            found.append(platform)
    return found


@pytest.mark.parametrize("platform", http_platforms(), ids=lambda p: p.name)
def test_both_spellings_reach_the_same_endpoint(platform: HttpPlatform[Any]) -> None:
    """The root plus the endpoint, or the full endpoint as before: one URL either way."""
    assert platform.endpoint.startswith("/"), "every HTTP platform names its endpoint path"
    root = "https://proxy.example/relay"
    full = root + platform.endpoint
    assert endpoint_url(root, platform.endpoint) == full
    assert endpoint_url(full, platform.endpoint) == full
    assert endpoint_url(full + "/", platform.endpoint) == full
