"""The page's waterfall (the search's timeline, wire/timeline.py) in headless Chromium against a
real `fanfuse serve`: a lane a platform, drawn live from its platform document while it runs,
then from the task document's timeline, and the search's own lane (fan-in, finalization).

Its screenshot (docs/images/page-timeline.png) is regenerated with
    FANFUSE_SCREENSHOTS=docs/images python -m pytest tests/integration/test_page_timeline.py
"""

from __future__ import annotations

from pathlib import Path

import httpx
from selenium.webdriver.common.by import By

from fanfuse.tools.devstack.serve_process import ServeProcess
from fanfuse.tools.stubs import StubSearxServer
from tests.integration.test_page import finished, open_page, run_state, search, shots_dir
from tests.integration.test_page import server as server
from tests.integration.test_page import stub as stub
from tests.support.browser import DESKTOP, BrowserFactory
from tests.support.browser import browser as browser

LANES_JS = """
return Array.from(document.querySelectorAll("#waterfall li.lane")).map((lane) => ({
  name: lane.getAttribute("data-platform") || "search",
  state: lane.getAttribute("data-state") || "",
  finished: lane.getAttribute("data-finished") || "",
  finalized: lane.getAttribute("data-finalized") || "",
  label: lane.getAttribute("aria-label") || "",
  segments: String(lane.querySelectorAll(".lane-track span").length),
}));
"""


def lanes(b_driver: object) -> dict[str, dict[str, str]]:
    """Each lane's platform -> its data attributes and the text a screen reader gets, read in
    one script: the page redraws the waterfall on every update, so lanes found in one call
    could be gone by the next (a stale element)."""
    from selenium.webdriver.remote.webdriver import WebDriver

    assert isinstance(b_driver, WebDriver)
    read: list[dict[str, str]] = b_driver.execute_script(LANES_JS)
    return {lane["name"]: {k: v for k, v in lane.items() if k != "name"} for lane in read}


def test_the_timeline_draws_a_waterfall_under_the_progress(
    browser: BrowserFactory, server: ServeProcess, stub: StubSearxServer, tmp_path: Path
) -> None:
    b = browser(*DESKTOP)
    open_page(b, server)
    task = search(b, "plasma timeline", ["web_ok", "web_gate", "docs"])
    b.wait(30).until(lambda _: stub.waiting("page") >= 1 and run_state(b, "web_ok") == "succeeded")
    b.wait().until(lambda d: "web_gate" in lanes(d) and "web_ok" in lanes(d))
    running = lanes(b.driver)
    assert running["web_gate"]["state"] == "running" and running["web_gate"]["finished"] == ""
    assert running["web_ok"]["state"] == "succeeded" and float(running["web_ok"]["finished"]) > 0
    assert "search" not in running  # not finalized yet

    stub.release("page")
    assert finished(b) == "completed"
    b.wait().until(lambda d: "search" in lanes(d))
    final = lanes(b.driver)
    view = httpx.get(
        f"{server.url}/search_status/{task}", headers={"X-Api-Key": server.api_key}
    ).json()
    kept = {e["platform"]: e for e in view["timeline"]["runs"]}
    for name in ("web_ok", "web_gate", "docs"):
        assert final[name]["state"] == "succeeded"
        assert float(final[name]["finished"]) == kept[name]["finished"]  # the document's numbers
        assert int(final[name]["segments"]) >= 3  # queue, claim, searching (and the tick)
        assert "searching" in final[name]["label"] and "finished" in final[name]["label"]
    assert float(final["search"]["finalized"]) == view["timeline"]["finalized"]
    assert float(final["web_gate"]["finished"]) <= float(final["search"]["finalized"])
    note = b.driver.find_element(By.ID, "timeline-note").text
    assert "Final answer at" in note and "slowest platform" in note
    shot = shots_dir(tmp_path) / "page-timeline.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    height = int(b.driver.execute_script("return document.documentElement.scrollHeight"))
    b.resize(DESKTOP[0], max(height, DESKTOP[1]))  # the whole section in the viewport
    b.driver.find_element(By.ID, "progress-section").screenshot(str(shot))
    assert shot.stat().st_size > 0
