"""Every command shown in README.md and docs/*.md runs as written, offline, on the embedded
runtime, in a fresh home folder: a doc that goes stale fails here.

The commands are the lines of the pages' ```bash blocks (a trailing `\\` joins lines, a `#`
comment is dropped) and README's ```python blocks; docs/python-api.md's Python blocks run in
tests/integration/test_python_api_docs.py. Each page runs in order, in its own session: a fresh
HOME (so `~/.cache/fanfuse` starts empty), `export` lines carried over, the repository's
`scripts/` and `.venv` reachable from the working folder. What the session does besides running
a command as written, each time said here:

- `fanfuse serve` runs in the background until the page ends (a reader starts it in a terminal
  of its own), on a free port: the page's `8000` becomes that port;
- `ff_...`, the placeholder for the key serve prints on its `api_key` line, becomes that key;
- README's `fanfuse index ~/notes` finds three notes there (the reader's notes).

A command that cannot run here is listed in CANNOT_RUN with the reason; a listed command that no
page shows any more fails the test, so the list stays the pages' list. Every relative link and
anchor of the pages must lead somewhere, too.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = ("bash", "sh", "shell", "console")
TIMEOUT_S = 300

CANNOT_RUN: list[tuple[str, str, str]] = [
    # (page, command pattern, why it cannot run here)
    ("README.md", r"^scripts/test\b", "the test suite this test belongs to (CI's .ci/run runs it)"),
    (
        "docs/getting-started.md",
        r"^scripts/setup$",
        "reinstalls .venv with pip (minutes, PyPI): the suite runs in the .venv scripts/test "
        "has just set up with it",
    ),
    (
        "docs/local-stack.md",
        r"^fanfuse dev\b",
        "starts the Firestore and Cloud Tasks emulators and five functions until Ctrl-C: "
        "tests/e2e run that stack (tests/integration/test_devstack.py starts `fanfuse dev`)",
    ),
    (
        "docs/local-stack.md",
        r"^fanfuse search --endpoint http://127\.0\.0\.1:PORT",
        "PORT and the key are what the `fanfuse dev` above prints",
    ),
    (
        "docs/mcp.md",
        r"^fanfuse mcp\b",
        "an MCP server, waiting for its client until stopped: tests/integration/test_mcp.py "
        "and tests/e2e/test_e2e_mcp.py drive it",
    ),
    (
        "docs/deploy.md",
        r".",
        "the deployment runbook: its rehearsals take minutes each and the rest needs a cloud "
        "account; tests/infra/test_deploy_docs.py checks that each of its commands is one "
        "scripts/deploy-rehearsal runs (tests/infra/test_rehearsal.py runs those) or is marked "
        "as not rehearsed, with why",
    ),
    ("docs/security.md", r"^fanfuse keys list \[--json\]", "`[--json]` is usage notation"),
    ("docs/security.md", r"^fanfuse keys revoke KEY_ID", "KEY_ID stands for a key's id"),
    (
        "docs/serve.md",
        r"^FANFUSE_SCREENSHOTS=",
        "runs this suite's browser test and rewrites the checked-in screenshots",
    ),
]

NOTES = {  # README's reader has notes in ~/notes
    "kayak.md": "# Kayak trip to the fjord\n\nWe paddled along the Geirangerfjord in July.\n",
    "bread.md": "---\ntitle: Sourdough starter\n---\nFeed the starter flour and water daily.\n",
    "budget.txt": "Quarterly budget review\n\nFinance wants the travel costs by Friday.\n",
}


@dataclass
class Command:
    page: str
    line: int
    text: str
    language: str = "bash"

    @property
    def why_not(self) -> str | None:
        for page, pattern, reason in CANNOT_RUN:
            if page == self.page and re.search(pattern, self.text):
                return reason
        return None


def _strip_comment(line: str) -> str:
    """The line without a `#` comment (a `#` outside quotes, at the start or after a blank)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands(page: Path) -> list[Command]:
    name = page.relative_to(ROOT).as_posix()
    text = page.read_text(encoding="utf-8")
    found: list[Command] = []
    for block in re.finditer(r"^```(\w+)\n(.*?)^```", text, re.M | re.S):
        language, body = block.group(1), block.group(2)
        first = text.count("\n", 0, block.start(2)) + 1
        if language == "python" and name == "README.md":
            found.append(Command(name, first, body, "python"))
            continue
        if language not in SHELLS:
            continue
        pending, start = "", first
        for offset, raw in enumerate(body.splitlines()):
            line = _strip_comment(raw) if not pending else raw.rstrip()
            if not pending:
                start = first + offset
            if line.endswith("\\"):
                pending += line[:-1]
                continue
            whole = " ".join((pending + line).split())
            pending = ""
            if whole:
                found.append(Command(name, start, whole))
    return found


ALL = [command for page in PAGES for command in commands(page)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Session:
    """One page's commands, in order, as a reader in a fresh home folder runs them."""

    work: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    server: subprocess.Popen[str] | None = None
    api_key: str = ""

    def prepare(self, text: str) -> str:
        text = re.sub(r"(?<=127\.0\.0\.1:)8000\b|(?<=--port )8000\b", str(self.port), text)
        return text.replace("ff_...", self.api_key) if self.api_key else text

    def run(self, command: Command) -> None:
        text = self.prepare(command.text)
        where = f"{command.page}:{command.line}: {command.text}"
        if command.language == "python":
            argv = [sys.executable, "-c", text]
        elif text.startswith("fanfuse serve"):
            self.serve(text, where)
            return
        elif (exported := re.fullmatch(r"export (\w+)=(\S+)", text)) is not None:
            self.env[exported.group(1)] = exported.group(2)
            return
        else:
            argv = ["bash", "-c", text]
        done = subprocess.run(
            argv,
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        assert done.returncode == 0, f"{where}\n{done.stdout}\n{done.stderr}"

    def serve(self, text: str, where: str) -> None:
        self.server = subprocess.Popen(
            ["bash", "-c", f"exec {text}"],
            cwd=self.work,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.server.stdout is not None
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            line = self.server.stdout.readline()
            if not line:
                break
            if line.startswith("api_key "):
                self.api_key = line.split()[1]
            if line.strip() == "ready":
                return
        pytest.fail(f"{where}: the server never said ready")

    def close(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server.wait(timeout=30)


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    (work / "docs").mkdir(parents=True)  # `fanfuse openapi > docs/openapi.json` writes here
    for entry in ("scripts", ".venv", "pyproject.toml"):
        (work / entry).symlink_to(ROOT / entry)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
    venv_bin = str(Path(sys.executable).parent)
    env.update(HOME=str(home), COLUMNS="80", PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}")
    env.pop("XDG_CACHE_HOME", None)
    opened = Session(work, env)
    yield opened
    opened.close()


RUN_PAGES = list(dict.fromkeys(c.page for c in ALL if c.why_not is None))
"""The pages showing a command that runs here (the others' marks: the test below)."""
LONG_PAGES = {"README.md": 120, "docs/getting-started.md": 90}
"""The pages whose commands run for minutes (`long`: started first on the xdist workers)."""


@pytest.mark.slow
@pytest.mark.parametrize(
    "page",
    [
        pytest.param(p, marks=pytest.mark.long(seconds=LONG_PAGES[p]))
        for p in RUN_PAGES
        if p in LONG_PAGES
    ]
    + [p for p in RUN_PAGES if p not in LONG_PAGES],
)
def test_the_commands_of_each_page_run(page: str, session: Session) -> None:
    runnable = [c for c in ALL if c.page == page and c.why_not is None]
    assert runnable, f"{page} shows no command that runs here"
    if page == "README.md":
        notes = Path(session.env["HOME"]) / "notes"
        notes.mkdir()
        for name, text in NOTES.items():
            (notes / name).write_text(text, encoding="utf-8")
    for command in runnable:
        started = time.monotonic()
        session.run(command)
        print(f"{time.monotonic() - started:6.1f} s  {command.page}:{command.line}", flush=True)
    if page == "docs/serve.md":  # `fanfuse openapi > docs/openapi.json` wrote the same document
        written = (session.work / "docs" / "openapi.json").read_text(encoding="utf-8")
        assert written == (ROOT / "docs" / "openapi.json").read_text(encoding="utf-8")


def test_the_pages_show_commands_and_every_mark_names_one() -> None:
    runnable = [c for c in ALL if c.why_not is None]
    assert len(runnable) >= 15, [c.text for c in runnable]
    for page, pattern, reason in CANNOT_RUN:
        assert any(c.page == page and re.search(pattern, c.text) for c in ALL), (page, pattern)
        assert reason
    readme = [c.text for c in ALL if c.page == "README.md"]
    assert readme[0].startswith("scripts/search ") and "scripts/test" in readme


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_relative_link_and_anchor_leads_somewhere() -> None:
    dead = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path = (page.parent / target).resolve() if target else page
            if not path.exists():
                dead.append(f"{page.name}: {target}")
            elif anchor and path.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)
                if anchor not in {_anchor(h) for h in headings}:
                    dead.append(f"{page.name}: {target}#{anchor}")
    assert dead == []
