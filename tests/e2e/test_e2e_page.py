"""The search page against the local functions stack, in a real browser (tests/support/browser.py).

The stack's page server (`fanfuse.tools.devstack.page_server`) serves serve's very page from an
origin of its own, with a config naming each function's URL and no event stream: the page lists the
platforms from `search_status/platforms`, starts at `start_search`, and polls `search_status`
for the progress and the fused preview. Each call is cross-origin, allowed by the functions
because the stack made the page's origin their one CORS origin; any other origin gets nothing.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx
from selenium.webdriver.common.by import By

from fanfuse.auth import keys
from tests.support.browser import Browser, BrowserFactory
from tests.support.browser import browser as browser
from tests.support.e2e.cloud import Cloud


def js(b: Browser, script: str) -> Any:
    return b.driver.execute_script(script)


def status(b: Browser) -> str:
    return str(js(b, "return document.getElementById('progress-section').dataset.status"))


def run_state(b: Browser, name: str) -> str | None:
    found = b.driver.find_elements(By.CSS_SELECTOR, f"#platform-runs li[data-platform='{name}']")
    return found[0].get_attribute("data-state") if found else None


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def test_the_page_searches_through_the_functions_with_progress_and_provenance(
    browser: BrowserFactory, e2e: Cloud
) -> None:
    page_url = e2e.addresses.page
    assert page_url is not None and e2e.addresses.api_key is not None
    b = browser()
    b.driver.get(page_url)
    b.wait().until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
    b.driver.find_element(By.ID, "api-key").send_keys(e2e.addresses.api_key)
    b.driver.find_element(By.ID, "key-save").click()
    b.wait(30).until(lambda d: d.find_elements(By.ID, "platform-web_gate"))  # from /platforms
    for name in ("web_ok", "web_gate"):
        b.driver.find_element(By.ID, f"platform-{name}").click()
    b.driver.find_element(By.ID, "queries").send_keys("electrons in a field")
    b.driver.find_element(By.ID, "search-button").click()

    # Progress while web_gate waits: web_ok done, the search running, web_ok's preview shown.
    b.wait(60).until(
        lambda _: e2e.stub.waiting("web_gate") >= 1 and run_state(b, "web_ok") == "succeeded"
    )
    b.wait(30).until(
        lambda _: js(b, "return document.getElementById('results').dataset.kind") == "preview"
    )
    assert status(b) == "running"
    assert run_state(b, "web_gate") in {"queued", "running"}
    overall = float(b.driver.find_element(By.ID, "overall-bar").get_attribute("value") or 0)
    assert 0 < overall < 100
    assert "Preview, not final" in b.driver.find_element(By.ID, "results-note").text

    e2e.stub.release("web_gate")
    b.wait(60).until(lambda _: status(b) in {"completed", "partial", "failed", "cancelled"})
    assert status(b) == "completed"
    assert run_state(b, "web_gate") == "succeeded"
    assert js(b, "return document.getElementById('results').dataset.kind") == "final"
    items: list[dict[str, str]] = js(
        b,
        """return [...document.querySelectorAll('#results li.result')].map(li => ({
            url: li.querySelector('.result-url').textContent,
            sources: li.querySelector('.provenance .sources').textContent}))""",
    )
    assert items
    shared = [item for item in items if "/shared/" in item["url"]]
    assert shared and all(
        "web_ok #" in item["sources"] and "web_gate #" in item["sources"] for item in shared
    )

    # Every call went to a function's own origin, none to the page's, and no CSP refusal.
    requests = [r["url"] for r in b.requests() if r["url"].startswith("http")]
    assert not [u for u in requests if u.endswith("/events")]  # polled: the functions have none
    sent = {origin(u) for u in requests}
    functions = {origin(e2e.addresses.functions[t]) for t in ("start_search", "search_status")}
    assert functions <= sent
    # The page's own origin served the page and its files (`/`, `/page/{name}`), nothing else
    # (but the icon the browser itself asks every origin for).
    own = [urlsplit(u).path for u in requests if origin(u) == origin(page_url)]
    assert "/" in own and "/page/config.json" in own
    assert {p for p in own if p != "/" and not p.startswith("/page/")} <= {"/favicon.ico"}
    assert sent <= functions | {origin(page_url)}
    assert not [e for e in b.console() if "Content Security Policy" in str(e.get("message"))]


def test_only_the_pages_origin_may_call_the_functions_cross_origin(e2e: Cloud) -> None:
    """The page's origin gets a preflight and CORS headers; another origin neither (its
    OPTIONS is the 405 it always was), and the answers still carry no wildcard."""
    assert e2e.addresses.page is not None
    page_origin = origin(e2e.addresses.page)
    url = e2e.url("start_search")
    ask = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-api-key"}
    with httpx.Client() as http:
        allowed = http.options(url, headers={"Origin": page_origin, **ask})
        assert allowed.status_code == 204
        assert allowed.headers["Access-Control-Allow-Origin"] == page_origin
        allowed_headers = allowed.headers["Access-Control-Allow-Headers"].lower()
        assert keys.API_KEY_HEADER.lower() in allowed_headers
        other = http.options(url, headers={"Origin": "http://127.0.0.1:9", **ask})
        assert other.status_code == 405
        assert "Access-Control-Allow-Origin" not in other.headers
        status_url = f"{e2e.url('search_status')}/platforms"
        listed = http.get(status_url, headers={"Origin": page_origin, **e2e.http.headers})
        assert listed.status_code == 200
        assert listed.headers["Access-Control-Allow-Origin"] == page_origin
        assert {"web_ok", "web_gate"} <= {p["name"] for p in listed.json()}
        anonymous = http.get(status_url)
        assert anonymous.status_code == 401
        assert "Access-Control-Allow-Origin" not in anonymous.headers
