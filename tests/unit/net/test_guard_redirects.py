"""`guard.get`: redirects followed one checked hop at a time, against a server on 127.0.0.1.

Names resolve through a resolver double (to 127.0.0.1, or to an address the guard refuses), so
no request leaves the machine, even when a redirect points elsewhere. Found by mutation testing
(`scripts/mutants guard`, docs/mutants.md): each test names the mutants of `get` it kills.
"""

from __future__ import annotations

import dataclasses
import ssl

import httpx
import pytest
import trustme
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.net import guard
from fanfuse.net.policy import FetchPolicy
from fanfuse.net.runner import Runner
from fanfuse.wire.errors import Refused
from fanfuse.wire.models import CallRecord

OPEN = FetchPolicy(allow_private=True, allow_loopback=True)


class Names:
    """A resolver double: each name to its addresses, every question recorded."""

    def __init__(self, **addresses: str) -> None:
        self.addresses = addresses
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return [self.addresses[host.split(".")[0]]]


def redirect(location: str, status: int = 302) -> Response:
    return Response("", status=status, headers={"Location": location})


async def test_a_redirect_is_a_new_hop_checked_and_sent_by_the_guard(
    server: HTTPServer, runner: Runner
) -> None:
    """Each hop is resolved, checked and recorded as a call of its own; the answer comes back
    with the URL it came from. Kills `follow_redirects=False` dropped or True (the runner
    would follow the redirect unchecked), the Location header not read, not joined to the
    current URL or the loop left at the first redirect, and `calls` not passed on."""
    names = Names(site="127.0.0.1")
    server.expect_request("/a").respond_with_response(redirect("/b?x=1"))
    server.expect_request("/b").respond_with_data("<p>b</p>", content_type="text/html")
    start = f"http://site.test:{server.port}/a"
    calls: list[CallRecord] = []
    response, final = await guard.get(runner, "k", start, OPEN, calls, resolver=names)
    assert (response.status, response.body) == (200, b"<p>b</p>")
    assert final == f"http://site.test:{server.port}/b?x=1"
    assert names.asked == ["site.test", "site.test"]
    assert [(c.status, (c.url or "").split("/")[-1]) for c in calls] == [(302, "a"), (200, "b?x=1")]


async def test_a_redirect_to_a_refused_address_is_never_sent(
    server: HTTPServer, runner: Runner
) -> None:
    """A public page cannot bounce the fetcher to cloud metadata: the next hop is refused
    before any request. The double answers 169.254.169.254 for `localhost`, so that even a
    guard that let the runner follow redirects would reach only this machine."""
    names = Names(site="127.0.0.1", localhost="169.254.169.254")
    secret = f"http://localhost:{server.port}/latest/"
    server.expect_request("/a").respond_with_response(redirect(secret))
    calls: list[CallRecord] = []
    with pytest.raises(Refused, match=r"localhost resolves to a cloud metadata address"):
        await guard.get(
            runner, "k", f"http://site.test:{server.port}/a", OPEN, calls, resolver=names
        )
    assert names.asked == ["site.test", "localhost"] and len(calls) == 1


async def test_only_a_redirect_status_with_a_location_is_followed(
    server: HTTPServer, runner: Runner
) -> None:
    """A 201 names its new resource in Location and a 300 offers choices: both are the answer.
    A 303 without a Location is an answer too. Kills `and` -> `or` and `in` -> `not in`."""
    server.expect_request("/created").respond_with_response(redirect("/elsewhere", status=201))
    server.expect_request("/choices").respond_with_response(redirect("/elsewhere", status=300))
    server.expect_request("/nowhere").respond_with_data("", status=303)
    for path, status in (("/created", 201), ("/choices", 300), ("/nowhere", 303)):
        url = f"http://site.test:{server.port}{path}"
        response, final = await guard.get(
            runner, "k", url, OPEN, None, resolver=Names(site="127.0.0.1")
        )
        assert (response.status, final) == (status, url)


@pytest.mark.parametrize("status", sorted(guard.REDIRECTS))
async def test_at_most_max_redirects_are_followed(
    server: HTTPServer, runner: Runner, status: int
) -> None:
    """Two redirects are followed under a limit of two, a third is refused with the limit named.
    Kills `max_redirects + 1` -> `- 1` or `+ 2`, and the refusal's message lost."""
    policy = dataclasses.replace(OPEN, max_redirects=2)
    for n in range(3):
        server.expect_request(f"/{n}").respond_with_response(redirect(f"/{n + 1}", status))
    server.expect_request("/3").respond_with_data("end", content_type="text/plain")
    names = Names(site="127.0.0.1")
    response, final = await guard.get(
        runner, "k", f"http://site.test:{server.port}/1", policy, None, resolver=names
    )
    assert (response.body, final) == (b"end", f"http://site.test:{server.port}/3")
    with pytest.raises(Refused, match=r"^more than 2 redirects$"):
        await guard.get(
            runner, "k", f"http://site.test:{server.port}/0", policy, None, resolver=names
        )


async def test_the_page_is_asked_as_a_browser_asks_it(server: HTTPServer, runner: Runner) -> None:
    """The policy's user agent and an Accept that prefers HTML (some sites answer a bare `*/*`
    with JSON or a challenge). Kills the User-Agent or Accept header misnamed or its value
    changed; only their case is free (HTTP header names, media types and the `q` parameter are
    case-insensitive: RFC 9110 sections 5.1 and 12.4.2)."""
    seen: list[tuple[str | None, str | None]] = []

    def page(request: Request) -> Response:
        seen.append((request.headers.get("User-Agent"), request.headers.get("Accept")))
        return Response("<p>ok</p>", content_type="text/html")

    server.expect_request("/page").respond_with_handler(page)
    url = f"http://site.test:{server.port}/page"
    await guard.get(runner, "k", url, OPEN, None, resolver=Names(site="127.0.0.1"))
    [(agent, accept)] = seen
    assert agent == OPEN.user_agent
    assert (accept or "").lower() == "text/html,text/plain;q=0.9,*/*;q=0.5"


async def test_an_unwanted_content_type_is_not_read(server: HTTPServer, runner: Runner) -> None:
    """`accept_types` reaches the runner: a body of another type is left unread. Kills
    `accept_types` dropped or None."""
    server.expect_request("/file").respond_with_data(b"\x00" * 64, content_type="application/zip")
    url = f"http://site.test:{server.port}/file"
    response, _ = await guard.get(
        runner, "k", url, OPEN, None, accept_types=("text/",), resolver=Names(site="127.0.0.1")
    )
    assert response.rejected_type and response.body == b""


async def test_an_https_page_is_verified_against_its_name_not_the_address() -> None:
    """The connection goes to the checked address, and TLS still asks for the name (SNI) and
    checks the certificate against it: a certificate for `site.test` served on 127.0.0.1 is
    accepted. Kills the `sni_hostname` extension not passed on (the certificate would be
    checked against 127.0.0.1 and refused)."""
    authority = trustme.CA()
    served = authority.issue_cert("site.test")
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.configure_cert(server_context)
    client_context = ssl.create_default_context()
    authority.configure_trust(client_context)
    server = HTTPServer(host="127.0.0.1", port=0, ssl_context=server_context)
    server.expect_request("/page").respond_with_data("<p>tls</p>", content_type="text/html")
    server.start()
    runner = Runner(transport=httpx.AsyncHTTPTransport(verify=client_context))
    try:
        url = f"https://site.test:{server.port}/page"
        response, final = await guard.get(
            runner, "k", url, OPEN, None, resolver=Names(site="127.0.0.1")
        )
        assert (response.status, response.body, final) == (200, b"<p>tls</p>", url)
    finally:
        await runner.aclose()
        server.clear()
        server.stop()
