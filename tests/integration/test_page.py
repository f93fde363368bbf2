"""The search page in a real browser: headless Chromium (tests/support/browser.py) against a real
`fanfuse serve --port 0` on 127.0.0.1, its platforms stub SearXNG servers on 127.0.0.1.

The stub platforms: `web_ok` answers after 0.2 s, `web_gate` and `web_hold` only once the test
releases their gate (`web_hold`'s never is: the search is cancelled), `web_fail` answers HTTP
500, `web_flaky` answers 500 to a query holding `zz500`, `web_tracked` gives the shared URLs
with `?utm_source=stub`. A stub result's title is the query
followed by `result N (...)`, so a query typed as HTML comes back as a provider's title.

Screenshots: each run of `test_a_search_streams_progress_then_fused_results` saves PNGs of the
page during the search and at its end, at desktop and phone width, into a temp folder, or into
`$FANFUSE_SCREENSHOTS` when set. The committed ones in docs/images/ are regenerated with
    FANFUSE_SCREENSHOTS=docs/images python -m pytest tests/integration/test_page.py -k streams
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from fanfuse.auth import keys
from fanfuse.fronts.serve import page
from fanfuse.store.sqlite import SqliteStore
from fanfuse.tools.devstack.processes import free_port
from fanfuse.tools.devstack.serve_process import ServeProcess
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.models import utcnow
from tests.support.browser import DESKTOP, PHONE, Browser, BrowserFactory
from tests.support.browser import browser as browser
from tests.support.option_scenarios import web_platforms

WEB = {
    "web_ok": "delay/0.2",
    "web_gate": "gate/page",
    "web_hold": "gate/hold",
    "web_fail": "status/500",
    "web_flaky": "fail-query/zz500/delay/0",
    "web_tracked": "tracked/delay/0",
}
DOCS = "<DOC>\n<DOCNO>D1</DOCNO>\n<TEXT>Plasma waves in the ionosphere.</TEXT>\n</DOC>\n"
HOSTILE = '<img src=x onerror="window.__pwned=1">'


@pytest.fixture(scope="module")
def stub() -> Iterator[StubSearxServer]:
    with StubSearxServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _open_gates_after(stub: StubSearxServer) -> Iterator[None]:
    yield
    stub.reset()  # releases what a test left waiting, and closes the gates for the next


def serve_env(tmp: Path, stub: StubSearxServer) -> dict[str, str]:
    """Only the variables set here: no provider key or platform of the machine leaks in."""
    (tmp / "lab.trec").write_text(DOCS, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
    env.update(
        {
            "FANFUSE_CACHE_DIR": str(tmp / "cache"),
            "FANFUSE_DB_PATH": str(tmp / "serve.db"),
            "FANFUSE_DOCS_CORPUS": str(tmp / "lab.trec"),
            "FANFUSE_VECTORS_CORPUS": str(tmp / "lab.trec"),
            "FANFUSE_PROGRESS_INTERVAL": "0",
            "FANFUSE_DEADLINE_SECONDS": "30",
            "FANFUSE_EXTRA_PLATFORMS": json.dumps(web_platforms(stub, WEB)),
        }
    )
    return env


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, stub: StubSearxServer
) -> Iterator[ServeProcess]:
    tmp = tmp_path_factory.mktemp("page")
    with ServeProcess("--warm", "none", env=serve_env(tmp, stub), log_dir=tmp / "logs") as process:
        yield process


def shots_dir(tmp_path: Path) -> Path:
    return Path(os.environ.get("FANFUSE_SCREENSHOTS") or tmp_path)


# ---------------------------------------------------------------------------------------------
# Driving the page


def open_page(b: Browser, server: ServeProcess, *, key: bool = True) -> None:
    b.driver.get(f"{server.url}/")
    b.wait().until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
    if key:
        b.driver.find_element(By.ID, "api-key").send_keys(server.api_key)
        b.driver.find_element(By.ID, "key-save").click()
        b.wait().until(lambda d: d.find_elements(By.ID, "platform-web_ok"))


def js(b: Browser, script: str, *args: Any) -> Any:
    return b.driver.execute_script(script, *args)


def search(b: Browser, queries: str, platforms: list[str], *, keyboard: bool = False) -> str:
    """Tick `platforms`, type `queries` and search; the task id the page is following."""
    for name in platforms:
        box = b.driver.find_element(By.ID, f"platform-{name}")
        if not box.is_selected():
            box.click()
    area = b.driver.find_element(By.ID, "queries")
    area.clear()
    area.send_keys(queries)
    if keyboard:
        area.send_keys(Keys.CONTROL, Keys.ENTER)
    else:
        b.driver.find_element(By.ID, "search-button").click()
    task = b.wait().until(
        lambda d: d.find_element(By.ID, "progress-section").get_attribute("data-task")
    )
    assert task is not None  # `until` returns the first truthy answer
    return task


def status(b: Browser) -> str:
    return str(js(b, "return document.getElementById('progress-section').dataset.status"))


def wait_status(b: Browser, *wanted: str) -> str:
    b.wait(30).until(lambda _: status(b) in wanted)
    return status(b)


def finished(b: Browser) -> str:
    """The search's terminal status, once the page shows one."""
    return wait_status(b, "completed", "partial", "failed", "cancelled")


def run_state(b: Browser, name: str) -> str | None:
    found = b.driver.find_elements(By.CSS_SELECTOR, f"#platform-runs li[data-platform='{name}']")
    return found[0].get_attribute("data-state") if found else None


def result_items(b: Browser) -> list[dict[str, str]]:
    """Each shown result: its title, URL and provenance as the user reads them."""
    items: list[dict[str, str]] = js(
        b,
        """return [...document.querySelectorAll('#results li.result')].map(li => ({
            title: li.querySelector('.result-title').textContent,
            url: li.querySelector('.result-url').textContent,
            sources: li.querySelector('.provenance .sources').textContent}))""",
    )
    return items


# ---------------------------------------------------------------------------------------------
# The tests


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_search_streams_progress_then_fused_results(
    browser: BrowserFactory,
    server: ServeProcess,
    stub: StubSearxServer,
    size: tuple[int, int],
    tmp_path: Path,
) -> None:
    """Typed and started from the keyboard; per-platform bars move on their own (web_ok done
    and web_fail failed while web_gate waits), the preview of web_ok's results shows while it
    waits, then the final list with every result's platforms and ranks, and the failure."""
    label = "desktop" if size == DESKTOP else "phone"
    b = browser(*size)
    open_page(b, server)
    # A query of its own: the other size's answers are in the cache, which would skip the gate.
    search(b, f"plasma waves on a {label}", ["web_ok", "web_gate", "web_fail"], keyboard=True)

    b.wait(30).until(lambda _: stub.waiting("page") >= 1 and run_state(b, "web_ok") == "succeeded")
    b.wait().until(
        lambda _: js(b, "return document.getElementById('results').dataset.kind") == "preview"
    )
    assert run_state(b, "web_gate") in {"queued", "running"}
    b.wait().until(lambda _: run_state(b, "web_fail") == "failed")
    assert status(b) == "running"
    note = b.driver.find_element(By.ID, "results-note").text
    assert "Preview, not final" in note and "web_ok" in note
    overall = float(b.driver.find_element(By.ID, "overall-bar").get_attribute("value") or 0)
    assert 0 < overall < 100
    preview = result_items(b)
    assert preview and all(item["sources"].startswith("web_ok #") for item in preview)
    b.screenshot(shots_dir(tmp_path) / f"page-{label}-running.png", full_page=True)

    stub.release("page")
    assert finished(b) == "partial"
    assert run_state(b, "web_gate") == "succeeded"
    failed = b.driver.find_element(By.CSS_SELECTOR, "#problems li[data-platform='web_fail']")
    assert "500" in failed.text
    assert js(b, "return document.getElementById('results').dataset.kind") == "final"
    assert b.driver.find_element(By.ID, "overall-text").text == "100%"
    final = result_items(b)
    assert len(final) == 10
    # The stub gives half its URLs to every platform: those were fused, each platform's rank
    # shown; the others came from one platform.
    shared = [item for item in final if "/shared/" in item["url"]]
    assert shared and all(
        "web_ok #" in item["sources"] and "web_gate #" in item["sources"] for item in shared
    )
    assert any(item["sources"].count("#") == 1 for item in final)
    first = final[0]
    assert first["url"] == "https://stub.test/shared/1"
    assert sorted(first["sources"].split(", ")) == ["web_gate #1", "web_ok #1"]
    if size == PHONE:  # readable at phone width: nothing wider than the screen
        assert js(b, "return document.documentElement.scrollWidth") <= PHONE[0]
    b.screenshot(shots_dir(tmp_path) / f"page-{label}-final.png", full_page=True)
    assert (shots_dir(tmp_path) / f"page-{label}-final.png").stat().st_size > 0


def test_cancel_stops_a_slow_search(
    browser: BrowserFactory, server: ServeProcess, stub: StubSearxServer
) -> None:
    b = browser()
    open_page(b, server)
    task = search(b, "slow one", ["web_hold"])
    b.wait(30).until(lambda _: stub.waiting("hold") >= 1)
    cancel = b.driver.find_element(By.ID, "cancel-button")
    assert cancel.is_enabled()
    cancel.click()
    assert finished(b) == "cancelled"
    b.wait().until(lambda _: run_state(b, "web_hold") == "cancelled")
    assert b.driver.find_element(By.ID, "search-button").is_enabled()
    assert not cancel.is_enabled()
    headers = {"X-Api-Key": server.api_key}
    view = httpx.get(f"{server.url}/search_status/{task}", headers=headers).json()
    assert view["status"] == "cancelled"  # the server's word, not only the page's


def test_a_failing_platform_is_reported_beside_the_others_results(
    browser: BrowserFactory, server: ServeProcess
) -> None:
    b = browser()
    open_page(b, server)
    search(b, "dielectric", ["web_ok", "web_fail"])
    assert finished(b) == "partial"
    assert run_state(b, "web_fail") == "failed"
    failed = b.driver.find_element(By.CSS_SELECTOR, "#problems li[data-platform='web_fail']")
    assert failed.is_displayed()
    assert "web_fail failed" in failed.text and "500" in failed.text
    row = b.driver.find_element(By.CSS_SELECTOR, "#platform-runs li[data-platform='web_fail']")
    assert "500" in row.find_element(By.CLASS_NAME, "run-error").text
    results = result_items(b)
    assert len(results) == 10 and all(item["sources"].startswith("web_ok #") for item in results)


def test_urls_merged_into_one_result_are_listed_as_its_variants(
    browser: BrowserFactory, server: ServeProcess
) -> None:
    """web_ok and web_tracked give the same pages, one of them with a tracking parameter: one
    result each, its clean URL shown and both spellings listed with who gave them."""
    b = browser()
    open_page(b, server)
    search(b, "variants", ["web_ok", "web_tracked"])
    assert finished(b) == "completed"
    first = b.driver.find_element(By.CSS_SELECTOR, "#results li.result")
    assert first.find_element(By.CLASS_NAME, "result-url").text == "https://stub.test/shared/1"
    variants = first.find_element(By.CSS_SELECTOR, "details.variants")
    summary = variants.find_element(By.TAG_NAME, "summary")
    assert summary.text == "2 URL variants merged"
    summary.send_keys(Keys.ENTER)
    listed = sorted(li.text for li in variants.find_elements(By.TAG_NAME, "li"))
    assert listed == [
        "https://stub.test/shared/1 — web_ok",
        "https://stub.test/shared/1?utm_source=stub — web_tracked",
    ]


def test_what_the_post_filters_removed_is_shown(
    browser: BrowserFactory, server: ServeProcess
) -> None:
    """A domain filter no stub result passes: no result, and the count it removed said."""
    b = browser()
    open_page(b, server)
    b.driver.find_element(By.CSS_SELECTOR, "#options summary").click()
    b.driver.find_element(By.ID, "include-domains").send_keys("example.org")
    search(b, "filtered away", ["web_ok"])
    final = finished(b)
    filtered = b.driver.find_element(By.CSS_SELECTOR, "#problems li.filtered")
    assert filtered.get_attribute("data-option") == "include_domains"
    assert filtered.text == "include_domains filtered out 10 results", final
    assert result_items(b) == []
    assert b.driver.find_element(By.CSS_SELECTOR, "#results p.note").text == "No results."


def test_several_queries_get_a_section_each_with_their_failures(
    browser: BrowserFactory, server: ServeProcess
) -> None:
    b = browser()
    open_page(b, server)
    search(b, "permittivity\nother zz500", ["web_flaky"])
    assert finished(b) == "partial"
    sections = b.driver.find_elements(By.CSS_SELECTOR, "#results section.query-section")
    assert [s.find_element(By.TAG_NAME, "h3").text for s in sections] == [
        "Query 1: permittivity",
        "Query 2: other zz500",
    ]
    assert len(sections[0].find_elements(By.CSS_SELECTOR, "li.result")) == 10
    assert not sections[0].find_elements(By.CLASS_NAME, "failed-query")
    (failure,) = sections[1].find_elements(By.CLASS_NAME, "failed-query")
    assert "web_flaky" in failure.text and "500" in failure.text


def test_a_provider_title_holding_html_renders_as_text(
    browser: BrowserFactory, server: ServeProcess
) -> None:
    b = browser()
    open_page(b, server)
    search(b, HOSTILE, ["web_ok"])
    assert finished(b) == "completed"
    titles = [item["title"] for item in result_items(b)]
    assert len(titles) == 10 and all(title.startswith(HOSTILE) for title in titles)
    shown = b.driver.find_element(By.CSS_SELECTOR, "#results li.result .result-title")
    assert shown.text.startswith(HOSTILE)  # visible, literally
    assert b.driver.find_elements(By.CSS_SELECTOR, "#results img") == []
    assert js(b, "return window.__pwned") is None
    # Nothing was even attempted: the CSP would report a blocked inline handler to the console.
    assert not [e for e in b.console() if "Content Security Policy" in str(e.get("message"))]


def test_the_key_is_kept_for_the_tab_and_the_request_copies_run(
    browser: BrowserFactory, server: ServeProcess
) -> None:
    """The key typed once survives a reload (sessionStorage, never localStorage); platforms
    list why they are unavailable; every option lands in the request, and its curl copy,
    run by a shell, starts the same search."""
    b = browser()
    open_page(b, server)
    b.driver.refresh()
    b.wait().until(lambda d: d.find_elements(By.ID, "platform-web_ok"))  # no key typed again
    assert b.driver.find_element(By.ID, "api-key").get_attribute("value") == ""
    assert js(b, "return sessionStorage.getItem('fanfuse.apiKey')") == server.api_key
    assert js(b, "return localStorage.length") == 0

    folded = b.driver.find_element(By.ID, "unavailable-platforms")
    folded.find_element(By.TAG_NAME, "summary").send_keys(Keys.ENTER)  # by keyboard
    assert folded.get_attribute("open") is not None
    unavailable = folded.find_element(By.CSS_SELECTOR, ".platform-item[data-platform=searxng]")
    assert not unavailable.find_element(By.TAG_NAME, "input").is_enabled()
    assert "FANFUSE_SEARXNG_BASE_URL" in unavailable.find_element(By.CLASS_NAME, "reason").text

    b.driver.find_element(By.ID, "platform-web_ok").click()
    b.driver.find_element(By.ID, "queries").send_keys("waveguide\nlaser it's")
    b.driver.find_element(By.CSS_SELECTOR, "#options summary").click()
    for field, value in {
        "max-results": "5",
        "include-domains": "stub.test, example.org",
        "exclude-domains": "spam.example",
        "country": "de",
        "timeout": "12",
    }.items():
        box = b.driver.find_element(By.ID, field)
        box.clear()
        box.send_keys(value)
    for field, value in {
        "mode": "fast",
        "time-range": "week",
        "safesearch": "strict",
        "cache": "bypass",
    }.items():
        js(
            b,
            "const s = document.getElementById(arguments[0]); s.value = arguments[1];"
            "s.dispatchEvent(new Event('change', {bubbles: true}))",
            field,
            value,
        )
    b.driver.find_element(By.ID, "request-details").find_element(By.TAG_NAME, "summary").click()
    body = json.loads(b.driver.find_element(By.ID, "request-json").text)
    assert body == {
        "query": ["waveguide", "laser it's"],
        "platform": ["web_ok"],
        "mode": "fast",
        "max_results": 5,
        "include_domains": ["stub.test", "example.org"],
        "exclude_domains": ["spam.example"],
        "time_range": "week",
        "country": "DE",
        "safesearch": "strict",
        "timeout_s": 12,
        "cache": "bypass",
    }
    curl = b.driver.find_element(By.ID, "request-curl").text
    b.driver.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": server.url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    b.driver.find_element(By.ID, "copy-curl").click()
    b.wait().until(lambda d: d.find_element(By.ID, "copy-note").text)
    assert b.driver.find_element(By.ID, "copy-note").text == "The curl command copied."
    clipboard = b.driver.execute_async_script(
        "navigator.clipboard.readText().then(arguments[0], e => arguments[0]('ERR ' + e))"
    )
    assert clipboard == curl
    env = {"PATH": os.environ["PATH"], "FANFUSE_API_KEY": server.api_key}
    ran = subprocess.run(
        ["bash", "-c", curl], env=env, capture_output=True, text=True, timeout=30, check=True
    )
    accepted = json.loads(ran.stdout)
    assert accepted["status"] == "pending" and accepted["task_id"]
    view = httpx.get(
        f"{server.url}/search_status/{accepted['task_id']}",
        headers={"X-Api-Key": server.api_key},
    ).json()
    assert view["request"]["query"] == body["query"] and view["request"]["timeout_s"] == 12


def test_without_a_key_the_page_asks_for_one_and_a_bad_key_is_refused(
    browser: BrowserFactory, server: ServeProcess
) -> None:
    b = browser()
    open_page(b, server, key=False)
    b.driver.find_element(By.ID, "queries").send_keys("anything")
    b.driver.find_element(By.ID, "search-button").click()
    errors = b.wait().until(lambda d: d.find_element(By.ID, "form-errors").text)
    assert "API key" in errors
    b.driver.find_element(By.ID, "api-key").send_keys("ff_0000000000000000_nope")
    b.driver.find_element(By.ID, "key-save").click()
    refused = b.wait().until(lambda d: d.find_element(By.ID, "key-note").text)
    b.wait().until(lambda d: "401" in d.find_element(By.ID, "key-note").text)
    assert "refused" in b.driver.find_element(By.ID, "key-note").text, refused


def test_the_page_is_public_with_a_strict_csp(server: ServeProcess) -> None:
    index = httpx.get(f"{server.url}/")
    assert index.status_code == 200
    assert index.headers["content-type"].startswith("text/html")
    csp = index.headers["content-security-policy"]
    assert csp == page.CSP
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self'" and directives["connect-src"] == "'self'"
    assert "unsafe" not in csp
    assert index.headers["x-content-type-options"] == "nosniff"
    script = httpx.get(f"{server.url}/page/page.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith(
        "text/javascript"
    )
    missing = httpx.get(f"{server.url}/page/..%2Fapp.py")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    assert httpx.post(f"{server.url}/").status_code == 405
    assert httpx.get(f"{server.url}/platforms").status_code == 401  # its calls are not public


def test_fetched_content_is_shown_under_its_result(
    browser: BrowserFactory, server: ServeProcess
) -> None:
    """The `docs` platform returns its documents' text as content when asked for it."""
    b = browser()
    open_page(b, server)
    b.driver.find_element(By.ID, "include-content").click()
    search(b, "plasma ionosphere", ["docs"])
    assert finished(b) == "completed"
    (item,) = b.driver.find_elements(By.CSS_SELECTOR, "#results li.result")
    assert item.find_element(By.CLASS_NAME, "result-url").text == "https://lab.local/doc/D1"
    content = item.find_element(By.CSS_SELECTOR, "details.content")
    content.find_element(By.TAG_NAME, "summary").send_keys(Keys.ENTER)
    assert content.find_element(By.CLASS_NAME, "content-text").text == (
        "Plasma waves in the ionosphere."
    )
    assert item.find_element(By.CSS_SELECTOR, ".provenance .sources").text == "docs #1"


def test_the_page_resumes_its_stream_when_the_server_restarts(
    browser: BrowserFactory, stub: StubSearxServer, tmp_path: Path
) -> None:
    """The server stops mid-search and starts again on the same port and database: the page
    says it lost the connection, reconnects (with Last-Event-ID) once the server is back, and
    shows the resumed search's end. The key is one stored in the database, so it outlives
    the first process (the printed one is revoked when its server stops)."""
    env = serve_env(tmp_path, stub)
    plaintext, record = keys.new_key("tester", "page test", None, None, utcnow())
    store = SqliteStore(env["FANFUSE_DB_PATH"])
    try:
        store.put_key(record)
    finally:
        store.close()
    port = str(free_port())
    first = ServeProcess("--warm", "none", "--port", port, env=env, log_dir=tmp_path / "a")
    with first:
        b = browser()
        b.driver.get(f"{first.url}/")
        b.wait().until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
        b.driver.find_element(By.ID, "api-key").send_keys(plaintext)
        b.driver.find_element(By.ID, "key-save").click()
        b.wait().until(lambda d: d.find_elements(By.ID, "platform-web_gate"))
        task = search(b, "restart me", ["web_ok", "web_gate"])
        b.wait(30).until(lambda _: run_state(b, "web_ok") == "succeeded")
    b.wait(30).until(lambda d: "reconnecting" in d.find_element(By.ID, "status-line").text)
    assert status(b) == "running"
    second = ServeProcess("--warm", "none", "--port", port, env=env, log_dir=tmp_path / "b")
    with second:
        assert second.url == first.url
        stub.release("page")
        assert finished(b) == "completed"
        assert js(b, "return document.getElementById('progress-section').dataset.task") == task
        assert len(result_items(b)) == 10
    streams = [r for r in b.requests() if r["url"].endswith(f"/search_status/{task}/events")]
    assert len(streams) >= 2
    assert "Last-Event-ID" not in streams[0]["headers"]
    resumed = streams[-1]["headers"]
    assert resumed["Last-Event-ID"] and resumed["X-Api-Key"] == plaintext
