"""Starting `fanfuse mcp` in a child process and talking to it with the SDK's own client.

Shared by tests/integration/test_mcp.py (embedded runtime) and tests/e2e/test_e2e_mcp.py
(`--endpoint` on the emulator stack). The child gets only the variables given here, so no
provider key, extra platform or database of the machine leaks into it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters
from mcp.types import CallToolResult, TextContent

SHARED = Path(__file__).resolve().parents[2] / "shared"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
"""A raw `initialize` request, for probing the HTTP transport without the SDK's client."""
ACCEPT = {"Accept": "application/json, text/event-stream"}
"""The Accept header streamable HTTP requires of a POST."""


def child_env(extra: dict[str, str]) -> dict[str, str]:
    """The child's variables: this environment without FANFUSE_*, then `extra`, and the
    worktree's library first on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FANFUSE_")}
    path = os.pathsep.join(p for p in (str(SHARED), env.get("PYTHONPATH")) if p)
    return {**env, **extra, "PYTHONPATH": path}


def embedded_env(tmp: Path) -> dict[str, str]:
    """An embedded `fanfuse mcp` in `tmp`: its own cache and database, `docs` over a one-document
    corpus, `vectors` unavailable (no model is loaded), a 30 s deadline."""
    corpus = tmp / "lab.trec"
    corpus.write_text(
        "<DOC>\n<DOCNO>P1</DOCNO>\n<TEXT>Plasma waves propagate in the ionosphere.</TEXT>\n</DOC>\n"
    )
    return {
        "FANFUSE_CACHE_DIR": str(tmp / "cache"),
        "FANFUSE_DB_PATH": str(tmp / "fanfuse.db"),
        "FANFUSE_DOCS_CORPUS": str(corpus),
        "FANFUSE_VECTORS_CORPUS": str(tmp / "no-such-corpus"),
        "FANFUSE_DEADLINE_SECONDS": "30",
    }


def stdio_server(env: dict[str, str], *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "fanfuse.cli.main", "mcp", *args], env=child_env(env)
    )


@contextmanager
def http_server(env: dict[str, str], *args: str) -> Iterator[str]:
    """`fanfuse mcp --http --port 0`: the URL it announces once it prints `ready`."""
    command = [sys.executable, "-m", "fanfuse.cli.main", "mcp", "--http", "--port", "0", *args]
    proc = subprocess.Popen(command, env=child_env(env), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first, second = proc.stdout.readline().split(), proc.stdout.readline().strip()
        assert first[:1] == ["url"] and second == "ready", (first, second)
        yield first[1]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def text(result: CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    data = result.structured_content
    assert isinstance(data, dict)
    return data
