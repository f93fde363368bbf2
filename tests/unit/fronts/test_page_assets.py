"""The search page's files (fronts/serve/static/, served by page.py): what the CSP and the
escaping rule need of them, checked on the text itself; the browser tests
(tests/integration/test_page.py) check them at work."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from html.parser import HTMLParser
from pathlib import Path

from fanfuse.fronts.serve import page

ROOT = Path(__file__).resolve().parents[3]
STATIC = ROOT / "shared" / "fanfuse" / "fronts" / "serve" / "static"


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text = ""
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script_text += data.strip()


def test_the_html_has_no_inline_script_style_or_handler_and_nothing_from_elsewhere() -> None:
    parsed = Tags()
    parsed.feed((STATIC / "index.html").read_text(encoding="utf-8"))
    scripts = [attrs for tag, attrs in parsed.tags if tag == "script"]
    assert scripts and all(attrs.get("src") for attrs in scripts)
    assert parsed.script_text == ""
    for tag, attrs in parsed.tags:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        assert "style" not in attrs, tag
        for link in (attrs.get("src"), attrs.get("href")):
            assert link is None or not re.match(r"^([a-z]+:)?//", link), link
    labelled = {attrs.get("for") for tag, attrs in parsed.tags if tag == "label"}
    for tag, attrs in parsed.tags:  # every control outside a <label> is named by one
        if tag in {"textarea"} or (tag == "input" and attrs.get("type") == "password"):
            assert attrs.get("id") in labelled, attrs


def test_the_script_inserts_text_never_html() -> None:
    script = (STATIC / "page.js").read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink
    assert "new Function" not in script
    assert "localStorage" not in script  # the key lives in the tab's sessionStorage only


def test_every_page_file_is_served_and_shipped_as_package_data() -> None:
    files = {p.name for p in STATIC.iterdir()}
    assert files == set(page.ASSETS)
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["fanfuse"]
    for name in files:
        assert any(fnmatch(f"fronts/serve/static/{name}", p) for p in patterns), name


def test_the_csp_allows_this_origin_only_and_nothing_inline() -> None:
    directives = dict(d.strip().split(" ", 1) for d in page.CSP.split(";"))
    assert directives["default-src"] == "'none'"
    assert {directives[k] for k in ("script-src", "style-src", "connect-src")} == {"'self'"}
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in page.CSP and "*" not in page.CSP


def test_the_functions_page_csp_adds_exactly_the_targets_origins() -> None:
    """The local stack's page (tools/devstack/page_server.py) may call its functions' origins, each
    on its own port, and nothing else: scripts and styles stay this origin's only."""
    from fanfuse.tools.devstack.page_server import page_config

    urls = {t: f"http://127.0.0.1:{port}" for t, port in [("start_search", 8101),
            ("search_status", 8102), ("cancel_search", 8103)]}  # fmt: skip
    config = page_config(urls)
    assert config["events"] is False
    assert config["platforms"] == "http://127.0.0.1:8102/platforms"
    origins = page.connect_origins(config)
    assert origins == sorted(urls.values())
    directives = dict(d.strip().split(" ", 1) for d in page.csp(origins).split(";"))
    assert directives["connect-src"].split() == ["'self'", *origins]
    assert {directives[k] for k in ("script-src", "style-src")} == {"'self'"}
    assert "*" not in page.csp(origins)


def test_serve_s_config_names_its_own_routes_and_its_event_stream() -> None:
    import json

    config = json.loads((STATIC / "config.json").read_text(encoding="utf-8"))
    assert config["events"] is True
    assert page.connect_origins(config) == []  # relative: this origin, the CSP's 'self'
