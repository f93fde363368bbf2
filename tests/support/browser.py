"""A real headless browser for the page tests: Debian's chromium driven through Selenium.

Why Debian's `chromium` and `chromium-driver` and not a browser selenium-manager downloads: the
two packages come in matching versions from the same repository, and the network rule forbids a
test run fetching anything. So the driver is always given by path (`Service(executable_path=)`),
which keeps selenium-manager from starting at all, and a missing browser fails the test with the
command that installs it: never a skip (scripts/test installs both on CI).

Chromium is a subprocess, outside pytest-socket's guard (tests/support/loopback.py), so it is
fenced in by its own flags: every request to anything but loopback goes to a proxy on 127.0.0.1:9
that refuses it, name lookups other than localhost fail, and the background services (updates,
sync, safe browsing, metrics) are off. The pages under test are served from 127.0.0.1 and their CSP
allows nothing else anyway.

Use it as a factory. In a test module, `from tests.support.browser import browser as browser` (the
fixture), then in a test `b = browser(*PHONE)` opens a window whose viewport is that size
(`DESKTOP` 1280x900 by default); `b.driver` is the Selenium WebDriver, `b.wait(seconds)` a
WebDriverWait, `b.screenshot(path, full_page=True)` saves a PNG, `b.console()` reads the
browser console. Every window is closed at the test's end. `FANFUSE_CHROMIUM` and
`FANFUSE_CHROMEDRIVER` name other binaries than the ones on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser")
CHROMEDRIVER_CANDIDATES = ("chromedriver",)
INSTALL_HINT = "apt-get install -y chromium chromium-driver (scripts/test does it on CI)"

DESKTOP = (1280, 900)
PHONE = (390, 844)

BrowserFactory = Callable[..., "Browser"]

# Chromium's own traffic, all off or aimed at a closed loopback port (see the module docstring).
FENCE_ARGS = (
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-sync",
    "--disable-client-side-phishing-detection",
    "--metrics-recording-only",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-features=OptimizationHints,MediaRouter,Translate,AutofillServerCommunication",
)


class BrowserMissingError(RuntimeError):
    """The browser or its driver is not installed: the message says how to install them."""


def find_binary(env_var: str, candidates: tuple[str, ...]) -> str:
    """The path in `env_var` when set, else the first candidate on PATH."""
    if explicit := os.environ.get(env_var):
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise BrowserMissingError(f"{env_var}={explicit} is not an executable file")
        return explicit
    for name in candidates:
        if found := shutil.which(name):
            return found
    raise BrowserMissingError(
        f"none of {', '.join(candidates)} is on PATH; install them: {INSTALL_HINT}"
        f" (or set {env_var})"
    )


def chrome_options(width: int, height: int, binary: str) -> webdriver.ChromeOptions:
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    options.add_argument("--headless=new")
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium's sandbox refuses to run as root
    options.add_argument("--disable-dev-shm-usage")  # small /dev/shm in containers
    options.add_argument(f"--window-size={width},{height}")
    options.add_argument("--force-device-scale-factor=1")
    for arg in FENCE_ARGS:
        options.add_argument(arg)
    # The browser's console, readable by the tests (a CSP violation is logged there).
    # and the requests it sent (DevTools' Network events, `Browser.requests`).
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return options


@dataclass
class Browser:
    """One headless Chromium window and the helpers the page tests share."""

    driver: WebDriver
    size: tuple[int, int] = DESKTOP
    default_wait: float = 15.0

    def wait(self, timeout: float | None = None) -> WebDriverWait[WebDriver]:
        return WebDriverWait(self.driver, self.default_wait if timeout is None else timeout)

    def resize(self, width: int, height: int) -> None:
        """The viewport's size, exactly: Chromium keeps a window at least 500 px wide, so a
        phone width is set through DevTools' device metrics (a mobile viewport) instead."""
        self.driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
        )
        self.size = (width, height)

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        """A PNG of the viewport, or of the whole page (the viewport grown to the page's
        height for the shot, then put back) when `full_page`."""
        path.parent.mkdir(parents=True, exist_ok=True)
        if not full_page:
            self.driver.save_screenshot(str(path))
            return path
        width, height = self.size
        page = int(self.driver.execute_script("return document.documentElement.scrollHeight"))
        self.resize(width, max(page, height))
        try:
            self.driver.save_screenshot(str(path))
        finally:
            self.resize(width, height)
        return path

    def requests(self) -> list[dict[str, Any]]:
        """The requests the page sent since the last call (`url`, `method`, `headers`), in
        order, from DevTools' `Network.requestWillBeSent` events."""
        sent = []
        # selenium's ChromiumDriver.get_log is unannotated (a list of dicts at run time)
        for entry in self.driver.get_log("performance"):  # type: ignore[no-untyped-call]
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                sent.append(message["params"]["request"])
        return sent

    def console(self) -> list[dict[str, object]]:
        """The browser console's entries since the last call."""
        entries: list[dict[str, object]] = self.driver.get_log("browser")  # type: ignore[no-untyped-call]  # selenium: unannotated
        return entries


def open_browser(width: int = DESKTOP[0], height: int = DESKTOP[1]) -> Browser:
    """A new headless Chromium window; raises BrowserMissingError when it is not installed."""
    binary = find_binary("FANFUSE_CHROMIUM", CHROMIUM_CANDIDATES)
    driver_path = find_binary("FANFUSE_CHROMEDRIVER", CHROMEDRIVER_CANDIDATES)
    service = Service(executable_path=driver_path)
    driver = webdriver.Chrome(service=service, options=chrome_options(width, height, binary))
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    opened = Browser(driver)
    opened.resize(width, height)
    return opened


@dataclass
class _Opened:
    browsers: list[Browser] = field(default_factory=list)

    def close(self) -> None:
        for b in self.browsers:
            b.driver.quit()


@pytest.fixture
def browser() -> Iterator[BrowserFactory]:
    """A factory of headless Chromium windows, `browser(width=1280, height=900)`, each closed
    at the test's end. Fails (never skips) when chromium or chromedriver is missing."""
    opened = _Opened()

    def make(width: int = DESKTOP[0], height: int = DESKTOP[1]) -> Browser:
        try:
            b = open_browser(width, height)
        except BrowserMissingError as exc:
            pytest.fail(str(exc), pytrace=False)
        opened.browsers.append(b)
        return b

    try:
        yield make
    finally:
        opened.close()
