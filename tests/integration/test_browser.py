"""The shared browser fixture (tests/support/browser.py): it opens Debian's chromium at the width
asked for, takes screenshots, and says how to install the browser when it is missing."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.support.browser import (
    INSTALL_HINT,
    PHONE,
    BrowserFactory,
    BrowserMissingError,
    find_binary,
)
from tests.support.browser import browser as browser

PAGE = (
    "data:text/html,<meta name=viewport content='width=device-width'>"
    "<title>t</title><h1 id=h>fixture</h1>"
)


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_phone_width_viewport_and_screenshot(browser: BrowserFactory, tmp_path: Path) -> None:
    b = browser(*PHONE)
    b.driver.get(PAGE)
    assert b.driver.find_element("id", "h").text == "fixture"
    assert b.driver.execute_script("return window.innerWidth") == PHONE[0]
    assert png_size(b.screenshot(tmp_path / "phone.png")) == PHONE


def test_a_missing_browser_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrowserMissingError, match="apt-get install") as caught:
        find_binary("FANFUSE_TEST_NO_SUCH_VAR", ("chromium",))
    assert INSTALL_HINT in str(caught.value)
    monkeypatch.setenv("FANFUSE_CHROMIUM", str(tmp_path / "absent"))
    with pytest.raises(BrowserMissingError, match="FANFUSE_CHROMIUM"):
        find_binary("FANFUSE_CHROMIUM", ("chromium",))
