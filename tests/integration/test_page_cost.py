"""The cost receipt on the search page (tests/support/browser.py, a real `fanfuse serve`): with
priced stub platforms (FANFUSE_PRICES), the final document's `cost` is shown as a receipt people
read, its total and one row per platform, each figure the document's own (wire/cost.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.common.by import By

from fanfuse.tools.devstack.serve_process import ServeProcess
from fanfuse.tools.stubs import StubSearxServer
from fanfuse.wire.cost import usd
from tests.integration.test_page import finished, open_page, search, serve_env, shots_dir
from tests.support.browser import BrowserFactory
from tests.support.browser import browser as browser

PRICES = {"web_ok": {"per_request_usd": 0.005}, "web_tracked": {"per_request_usd": 0.0125}}


@pytest.fixture(scope="module")
def stub() -> Iterator[StubSearxServer]:
    with StubSearxServer() as server:
        yield server


@pytest.fixture(scope="module")
def priced(
    tmp_path_factory: pytest.TempPathFactory, stub: StubSearxServer
) -> Iterator[ServeProcess]:
    tmp = tmp_path_factory.mktemp("page-cost")
    env = {**serve_env(tmp, stub), "FANFUSE_PRICES": json.dumps(PRICES)}
    with ServeProcess("--warm", "none", env=env, log_dir=tmp / "logs") as process:
        yield process


def test_the_receipt_shows_the_total_and_each_platforms_cost(
    browser: BrowserFactory, priced: ServeProcess, tmp_path: Path
) -> None:
    b = browser()
    open_page(b, priced)
    task = search(b, "priced receipt", ["web_ok", "web_tracked"])
    assert finished(b) == "completed"
    section = b.driver.find_element(By.ID, "cost-section")
    assert section.is_displayed()

    headers = {"X-Api-Key": priced.api_key}
    cost = httpx.get(f"{priced.url}/search_status/{task}", headers=headers).json()["cost"]
    # Charged at the deployment's prices: one request (one page of 10) each.
    for name, price in PRICES.items():
        assert cost["platforms"][name]["calls"] >= 1
        charged = cost["platforms"][name]["calls"] * price["per_request_usd"]
        assert cost["platforms"][name]["usd"] == pytest.approx(charged)
    assert cost["total_usd"] == pytest.approx(sum(p["usd"] for p in cost["platforms"].values()))

    total = b.driver.find_element(By.ID, "cost-total").text
    assert total.startswith(f"Total {usd(cost['total_usd'])}")
    assert f"estimated {usd(cost['estimate_usd'])}" in total
    rows = {
        row.get_attribute("data-platform"): [c.text for c in row.find_elements(By.XPATH, "./*")]
        for row in b.driver.find_elements(By.CSS_SELECTOR, "#cost-platforms tbody tr")
    }
    assert rows == {
        name: [
            name,
            str(p["calls"]),
            usd(p["usd"]),
            usd(p["estimate_usd"]),
        ]
        for name, p in cost["platforms"].items()
    }
    heads = [th.text for th in b.driver.find_elements(By.CSS_SELECTOR, "#cost-platforms thead th")]
    assert heads == ["Platform", "Calls", "Cost", "Estimate"]
    # A receipt, not a dump of the document: no field name of the JSON shows.
    shown = b.driver.find_element(By.ID, "cost").text
    assert "total_usd" not in shown and "estimate_usd" not in shown and "{" not in shown
    b.screenshot(shots_dir(tmp_path) / "page-cost.png", full_page=True)


def test_a_search_with_no_priced_platform_shows_a_zero_receipt(
    browser: BrowserFactory, priced: ServeProcess
) -> None:
    """web_fail is not priced (and a 500 is not billed): the receipt says $0, never hides."""
    b = browser()
    open_page(b, priced)
    search(b, "free receipt", ["web_fail"])
    finished(b)
    assert b.driver.find_element(By.ID, "cost-total").text.startswith("Total $0")
