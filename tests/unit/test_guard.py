"""The SSRF guard's decisions (pure: no request leaves for any of these addresses) and the
pinned connection, against a server on 127.0.0.1 reached through a resolver double."""

from __future__ import annotations

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.errors import Refused
from fanfuse.net import guard
from fanfuse.net.guard import FetchPolicy, address_problem, check_url, pinned
from fanfuse.net.runner import Runner

CLOSED = FetchPolicy()
OPEN = FetchPolicy(allow_private=True, allow_loopback=True)


@pytest.mark.parametrize(
    ("ip", "problem"),
    [
        ("93.184.216.34", None),
        ("2606:4700::1111", None),
        ("100.100.100.200", "cloud metadata"),  # Alibaba's, inside 100.64.0.0/10
        ("169.254.169.254", "cloud metadata"),
        ("::ffff:169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("169.254.170.2", "cloud metadata"),
        ("100.64.0.1", "non-global"),  # shared address space: the hole this closes
        ("10.1.2.3", "private"),
        ("192.168.0.1", "private"),
        ("127.0.0.1", "loopback"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "private"),
    ],
)
def test_only_global_addresses_pass_a_closed_policy(ip: str, problem: str | None) -> None:
    assert address_problem(ip, CLOSED) == problem


@pytest.mark.parametrize("ip", ["192.0.2.1", "198.18.0.1", "2001:db8::1", "240.0.0.1"])
def test_documentation_benchmark_and_reserved_space_is_refused(ip: str) -> None:
    assert address_problem(ip, CLOSED) is not None


@pytest.mark.parametrize("ip", ["169.254.169.254", "100.100.100.200", "fd00:ec2::254"])
def test_metadata_addresses_are_refused_even_where_private_ones_are_allowed(ip: str) -> None:
    assert address_problem(ip, OPEN) == "cloud metadata"
    assert address_problem("10.0.0.1", OPEN) is None


@pytest.mark.parametrize(
    "url", ["http://metadata.google.internal/computeMetadata/v1/", "http://METADATA./x"]
)
async def test_metadata_names_are_refused_before_any_lookup(url: str) -> None:
    async def resolver(host: str, port: int) -> list[str]:
        raise AssertionError("a metadata name must not even be resolved")

    with pytest.raises(Refused, match="cloud metadata service"):
        await check_url(url, OPEN, resolver)


async def test_a_name_with_one_bad_address_among_good_ones_is_refused() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "100.64.9.9"]

    with pytest.raises(Refused, match=r"non-global address \(100.64.9.9\)"):
        await check_url("https://mixed.test/", CLOSED, resolver)


def test_pinned_keeps_the_name_in_host_and_tls() -> None:
    assert pinned("https://site.test:8443/a?b=1", "93.184.216.34") == (
        "https://93.184.216.34:8443/a?b=1",
        {"Host": "site.test:8443"},
        {"sni_hostname": "site.test"},
    )
    assert pinned("http://site.test/a", "2606:4700::1111") == (
        "http://[2606:4700::1111]/a",
        {"Host": "site.test"},
        {},
    )
    assert pinned("http://127.0.0.1:81/a", "127.0.0.1") == ("http://127.0.0.1:81/a", {}, {})


async def test_the_fetch_goes_to_the_checked_address_not_a_second_lookup(
    server: HTTPServer, runner: Runner
) -> None:
    """`rebind.test` resolves only through the double (to 127.0.0.1). Were the name handed to
    httpx, it would look it up again (and fail, or, with a rebinding DNS, go elsewhere)."""
    lookups: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    seen: list[str] = []

    def page(request: Request) -> Response:
        seen.append(request.headers["Host"])
        return Response("<p>pinned</p>", content_type="text/html")

    server.expect_request("/page").respond_with_handler(page)
    url = f"http://rebind.test:{server.port}/page"
    response, final = await guard.get(runner, "k", url, OPEN, None, resolver=resolver)
    assert (response.status, response.body, final) == (200, b"<p>pinned</p>", url)
    assert seen == [f"rebind.test:{server.port}"] and lookups == ["rebind.test"]
