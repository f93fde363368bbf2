"""The example app (examples/web-app) in a real browser against the emulator stack.

Headless Chromium (tests/support/browser.py) loads the app from a static server on 127.0.0.1. The
app signs in as the Firestore emulator's mock user (an unsigned Firebase ID token), starts a search
through a start_search function that accepts such tokens for the stack's `demo-` project
(FANFUSE_FIREBASE_EMULATOR_TOKENS) and answers CORS for the app's origin, then watches the task
document and its platform documents with the Firebase JS SDK's `onSnapshot`, through
infra/firestore.rules loaded into the stack's Firestore emulator. No request of the page leaves
127.0.0.1: the SDK's browser builds come from examples/web-app/node_modules (`npm ci` there;
scripts/test runs it), and the browser is fenced to loopback.

The search runs `docs` (answers at once), `web_fail` (HTTP 500) and `web_gate` (held until the
test releases it), so the page shows one platform done, one failed and one still running before
it shows the final list. The query holds HTML, which the stub platforms repeat in their result
titles, as a hostile provider might: the page shows it as text. A second user, signed in,
asking for the first user's search is refused by the rules, and the page says so.

Screenshots of the app during and after the search go to a temp folder, or to
`$FANFUSE_SCREENSHOTS` when set; docs/images/web-app-*.png are regenerated with
    FANFUSE_SCREENSHOTS=docs/images python -m pytest tests/e2e/test_e2e_web_app.py -k watches
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from fanfuse.tools.devstack.functions_host import FunctionProcess
from fanfuse.tools.devstack.processes import LOOPBACK, free_port
from fanfuse.tools.devstack.stack import browser_app_env, browser_app_url
from tests.support.browser import Browser, BrowserFactory
from tests.support.browser import browser as browser
from tests.support.e2e.cloud import TERMINAL, Cloud

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "web-app"
RULES = ROOT / "infra" / "firestore.rules"
SDK = APP / "node_modules" / "firebase" / "firebase-firestore.js"


QUERY = "electrons <img src=x onerror=\"document.title='pwned'\">"
TITLE = "fanfuse example app: a search watched on Firestore"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def app_origin() -> Iterator[str]:
    """examples/web-app served as static files on 127.0.0.1 (what `python -m http.server` does)."""
    assert SDK.is_file(), f"{SDK} is missing: run `npm ci` in {APP} (scripts/test does)"
    handler = functools.partial(_Quiet, directory=str(APP))
    server = ThreadingHTTPServer((LOOPBACK, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{LOOPBACK}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def app_start_url(
    cloud: Cloud, app_origin: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A start_search and a cancel_search of the stack as `fanfuse dev --app-origin` runs
    them (browser_app_env): Firebase emulator tokens of the stack's project accepted, CORS for
    the app's origin; the searches it starts name that cancel_search as their `cancel_url`. The
    stack's Firestore emulator gets the real rules (server clients bypass them: no other test
    sees a difference)."""
    cloud.stack.firestore.load_rules(RULES.read_text())
    app_env = browser_app_env([app_origin], cloud.addresses.project)
    assert app_env is not None
    ports = {"start_search": free_port(), "cancel_search": free_port()}
    urls = {**cloud.addresses.functions, **{t: f"http://{LOOPBACK}:{n}" for t, n in ports.items()}}
    env = {
        **cloud.addresses.env(),
        **cloud.env,
        **app_env,
        "FANFUSE_FUNCTION_URLS": json.dumps(urls),
    }
    logs = tmp_path_factory.mktemp("web-app-functions")
    processes = [FunctionProcess(t, n, env, log_dir=logs) for t, n in ports.items()]
    try:
        for process in processes:
            process.launch()
        for process in processes:
            process.wait_ready()
        yield urls["start_search"]
    finally:
        for process in processes:
            process.stop()


def shots_dir(tmp_path: Path) -> Path:
    return Path(os.environ.get("FANFUSE_SCREENSHOTS") or tmp_path)


def open_app(b: Browser, origin: str, cloud: Cloud, start_url: str) -> None:
    """The app's page as `fanfuse dev --app-origin` prints it, but with this start_search."""
    addresses = dataclasses.replace(
        cloud.addresses, functions={**cloud.addresses.functions, "start_search": start_url}
    )
    b.driver.get(browser_app_url(origin, addresses))
    b.wait().until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))


def sign_in(b: Browser, uid: str) -> None:
    field = b.driver.find_element(By.ID, "uid")
    field.clear()
    field.send_keys(uid)
    b.driver.find_element(By.ID, "signin-button").click()
    b.wait().until(lambda d: text(d, "who") == f"Signed in as {uid}.")


def text(driver: WebDriver, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


PLATFORM_ROWS = """
return [...document.querySelectorAll('#platform-list li')].map(
    (li) => [li.dataset.platform, li.dataset.state, li.querySelector('.error')?.textContent ?? ''])
"""


def platform_rows(driver: WebDriver) -> dict[str, tuple[str, str]]:
    """{platform: (state, error)} as the page shows them, read in one script: the list is
    rebuilt on every snapshot, so rows found one call earlier may be gone the next."""
    rows = driver.execute_script(PLATFORM_ROWS)
    return {str(name): (str(state), str(error)) for name, state, error in rows}


def platform_states(driver: WebDriver) -> dict[str, str]:
    return {name: state for name, (state, _) in platform_rows(driver).items()}


def test_the_app_watches_its_search_live_and_another_user_is_denied_it(
    e2e: Cloud, app_origin: str, app_start_url: str, browser: BrowserFactory, tmp_path: Path
) -> None:
    alice = browser()
    open_app(alice, app_origin, e2e, app_start_url)
    sign_in(alice, "alice")
    query = alice.driver.find_element(By.ID, "query")
    query.clear()
    query.send_keys(QUERY)
    names = alice.driver.find_element(By.ID, "platforms")
    names.clear()
    names.send_keys("docs,web_fail,web_gate")
    alice.driver.find_element(By.ID, "search-button").click()

    # Live: docs done and web_fail failed while web_gate is still held at its provider.
    alice.wait(60).until(
        lambda d: (
            platform_states(d) == {"docs": "succeeded", "web_fail": "failed", "web_gate": "running"}
        )
    )
    task_id = text(alice.driver, "task")
    assert e2e.task_doc(task_id)["owner"] == "firebase:alice"
    assert text(alice.driver, "status") not in TERMINAL
    assert alice.driver.find_elements(By.CSS_SELECTOR, "#results li") == []
    assert "HTTP 500" in platform_rows(alice.driver)["web_fail"][1]
    overall = float(alice.driver.find_element(By.ID, "overall-bar").get_attribute("value") or 0)
    assert 0 < overall < 100
    alice.screenshot(shots_dir(tmp_path) / "web-app-running.png", full_page=True)

    # The held platform answers: its document changes under the page, then the task finalizes.
    e2e.stub.release("web_gate")
    alice.wait(60).until(lambda d: text(d, "status") == "partial")
    assert platform_states(alice.driver)["web_gate"] == "succeeded"
    assert text(alice.driver, "overall") == "100%"
    stored = e2e.task_doc(task_id)
    items = alice.driver.find_elements(By.CSS_SELECTOR, "#results li")
    assert len(items) == len(stored["results"]) > 0
    for item, result in zip(items, stored["results"], strict=True):
        assert item.find_element(By.CLASS_NAME, "title").text == result["title"]
        provenance = " · ".join(f"{name} #{rank}" for name, rank in result["ranks"].items())
        assert item.find_element(By.CLASS_NAME, "from").text == f"from {provenance}"
    assert {r["platform"] for r in stored["results"]} <= {"docs", "web_gate"}
    # The stub's titles repeat the query, HTML included: shown as text, never as markup.
    assert any("<img src=x onerror=" in r["title"] for r in stored["results"])
    assert alice.driver.find_elements(By.CSS_SELECTOR, "#results img") == []
    assert alice.driver.title == TITLE
    assert "web_fail failed" in text(alice.driver, "errors")
    assert text(alice.driver, "summary") == stored["summary"]["message"]
    alice.screenshot(shots_dir(tmp_path) / "web-app-final.png", full_page=True)

    # Another signed-in user asks for alice's search: the rules refuse both listeners.
    bob = browser()
    open_app(bob, app_origin, e2e, app_start_url)
    sign_in(bob, "bob")
    bob.driver.find_element(By.ID, "task-id").send_keys(task_id)
    bob.driver.find_element(By.ID, "watch-button").click()
    bob.wait(30).until(lambda d: text(d, "status") == "denied")
    bob.wait(30).until(lambda d: len(text(d, "problem").splitlines()) == 2)
    assert sorted(text(bob.driver, "problem").splitlines()) == [
        f"Denied: bob may not read the {what} of search {task_id} (permission-denied)."
        for what in ("platform documents", "task document")
    ]
    assert bob.driver.find_elements(By.CSS_SELECTOR, "#results li") == []
    assert bob.driver.find_elements(By.CSS_SELECTOR, "#platform-list li") == []
    bob.screenshot(shots_dir(tmp_path) / "web-app-denied.png", full_page=True)

    # And alice, watching it again by id, still reads it.
    alice.driver.find_element(By.ID, "task-id").send_keys(task_id)
    alice.driver.find_element(By.ID, "watch-button").click()
    alice.wait(30).until(lambda d: text(d, "status") == "partial")
    assert text(alice.driver, "problem") == ""

    # A search she cancels while web_gate is held again: the documents say so, the page too.
    e2e.stub.reset()  # gates closed again
    query.clear()
    query.send_keys("plasma")  # not the first query: its answers are in the search cache
    names.clear()
    names.send_keys("docs,web_gate")
    alice.driver.find_element(By.ID, "search-button").click()
    alice.wait(60).until(lambda d: platform_states(d).get("web_gate") == "running")
    held = text(alice.driver, "task")
    assert held != task_id
    alice.driver.find_element(By.ID, "cancel").click()
    alice.wait(30).until(lambda d: text(d, "status") == "cancelled")
    assert e2e.task_doc(held)["status"] == "cancelled"
    assert alice.driver.find_element(By.ID, "cancel").is_displayed() is False
