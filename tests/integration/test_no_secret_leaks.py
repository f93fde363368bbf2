"""Secrets never leave (issue 10, item 5): a full search with every key set, then a grep.

Every web provider with a credential, the builtin LLM search, the LLM reranker and the LLM
compressor answer from one 127.0.0.1 double, each as its documentation describes, and several
the way a provider fails in the field: a 401 (brave), a 429 that never clears (tavily), a 500
(exa, the reranker, the compressor), each echoing the credential it was sent in its error body,
and a SearXNG instance reached with a password in its base URL. A `comprehensive` search runs
all of it (page fetches, compression, rerank). Then every log record (DEBUG and up), the final
task, every row of the SQLite store (tasks, platform runs, contents, cache, health) and the
store's files byte for byte are searched for each secret, as sent and URL- or JSON-encoded.

The double checks each credential arrived, so the secrets were really in play: a search that
never sent them could not fail this test.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fanfuse.net.runner import Runner
from fanfuse.platforms import Registry
from fanfuse.runtimes.embedded import EmbeddedRuntime
from fanfuse.settings import Settings
from fanfuse.wire.models import PlatformState, TaskStatus

pytestmark = pytest.mark.timeout(120)

MARK = "LEAK"
"""Every secret has it near its start, so even a cut-off secret is found."""
SECRETS = {
    "FANFUSE_GOOGLE_API_KEY": "AIza-LEAK01+google/canary=x",
    "FANFUSE_BRAVE_API_KEY": "BSA-LEAK02-brave-canary",
    "FANFUSE_TAVILY_API_KEY": "tvly-LEAK03-tavily-canary",
    "FANFUSE_EXA_API_KEY": "exa-LEAK04-canary",
    "FANFUSE_LINKUP_API_KEY": "lk-LEAK05-linkup-canary",
    "FANFUSE_PERPLEXITY_API_KEY": "pplx-LEAK06-canary",
    "FANFUSE_BUILTIN_API_KEY": "sk-LEAK07-builtin-canary",
    "FANFUSE_RERANK_LLM_API_KEY": "sk-LEAK08-rerank-canary",
    "FANFUSE_CONTENT_LLM_API_KEY": "sk-LEAK09-compress-canary",
    "FANFUSE_TASKS_HMAC_SECRET": "hmac-LEAK10-canary",
}
SEARX_USER, SEARX_PASSWORD = "searx", "pw-LEAK11-searx-canary"
PLATFORMS = ["google", "brave", "tavily", "exa", "linkup", "builtin", "searxng"]
PARAGRAPH = (
    "Attention lets every position of a sequence look at every other position in one step, "
    "which makes training parallel and shortens the paths of long-range dependencies. "
)


def secret_forms() -> list[str]:
    """Every spelling of every secret a leak could take: as sent, URL-encoded (path and form),
    JSON-escaped, and the searx password as HTTP Basic sends it."""
    forms = [
        form
        for value in [*SECRETS.values(), SEARX_PASSWORD]
        for form in (value, quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1])
    ]
    return [*forms, base64.b64encode(f"{SEARX_USER}:{SEARX_PASSWORD}".encode()).decode()]


def leaks(text: str) -> list[str]:
    """Where `text` holds a secret, in any of its forms or cut short: one excerpt around the
    first sighting of each (the values are fake, so the failure may show them)."""
    found = []
    for form in [*secret_forms(), MARK]:
        at = text.find(form)
        if at >= 0:
            found.append(text[max(at - 160, 0) : at + len(form) + 40])
    return found


# -- the providers' double -------------------------------------------------------------------


def page_paths(name: str) -> list[str]:
    """The pages a provider's results link to, on the double (so fetching stays on 127.0.0.1)."""
    return [f"/pages/{name}-{i}.html" for i in range(2)]


def page_urls(server: HTTPServer, name: str) -> list[str]:
    return [server.url_for(path) for path in page_paths(name)]


def json_answer(data: object, status: int = 200, **headers: str) -> Response:
    return Response(
        json.dumps(data), status=status, headers=headers, content_type="application/json"
    )


class Providers:
    """Each provider's endpoint on the double, answering as its documentation says."""

    def __init__(self, server: HTTPServer) -> None:
        self.server = server
        self.seen: set[str] = set()

    def key(self, request: Request, expected: str, got: str | None) -> None:
        assert got == expected, f"{request.path}: the configured credential was not sent"
        self.seen.add(request.path.split("/")[1])

    def bearer(self, request: Request, env: str) -> None:
        self.key(request, f"Bearer {SECRETS[env]}", request.headers.get("Authorization"))

    def google(self, request: Request) -> Response:
        self.key(request, SECRETS["FANFUSE_GOOGLE_API_KEY"], request.args.get("key"))
        items = [
            {"title": f"Google result {i}", "link": url, "snippet": "attention"}
            for i, url in enumerate(page_urls(self.server, "google"))
        ]
        return json_answer({"items": items})

    def brave(self, request: Request) -> Response:  # 401, echoing the token
        self.key(
            request, SECRETS["FANFUSE_BRAVE_API_KEY"], request.headers.get("X-Subscription-Token")
        )
        token = request.headers["X-Subscription-Token"]
        detail = f"The provided subscription token {token} is invalid."
        error = {"code": "SUBSCRIPTION_TOKEN_INVALID", "detail": detail, "status": 401}
        return json_answer({"type": "ErrorResponse", "error": error}, 401)

    def tavily(self, request: Request) -> Response:  # 429 that never clears, echoing the key
        self.bearer(request, "FANFUSE_TAVILY_API_KEY")
        key = request.headers["Authorization"].removeprefix("Bearer ")
        detail = {"error": f"Rate limit exceeded for key {key}"}
        return json_answer({"detail": detail}, 429, **{"Retry-After": "0"})

    def exa(self, request: Request) -> Response:  # 500 with a debugging dump of the request
        self.key(request, SECRETS["FANFUSE_EXA_API_KEY"], request.headers.get("x-api-key"))
        dump = f"internal error; request headers: x-api-key={request.headers['x-api-key']}"
        return Response(dump, status=500, content_type="text/plain")

    def linkup(self, request: Request) -> Response:
        self.bearer(request, "FANFUSE_LINKUP_API_KEY")
        results = [
            {"type": "text", "name": f"Linkup result {i}", "url": url, "content": PARAGRAPH * 40}
            for i, url in enumerate(page_urls(self.server, "linkup"))
        ]
        return json_answer({"results": results})

    def builtin(self, request: Request) -> Response:  # 401 as OpenAI-style APIs answer it
        self.bearer(request, "FANFUSE_BUILTIN_API_KEY")
        key = request.headers["Authorization"].removeprefix("Bearer ")
        error = {"message": f"Incorrect API key provided: {key}.", "code": "invalid_api_key"}
        return json_answer({"error": error}, 401)

    def perplexity(self, request: Request) -> Response:  # builtin's fallback
        self.bearer(request, "FANFUSE_PERPLEXITY_API_KEY")
        results = [
            {"title": f"Perplexity result {i}", "url": url, "snippet": "attention"}
            for i, url in enumerate(page_urls(self.server, "perplexity"))
        ]
        return json_answer({"results": results})

    def searxng(self, request: Request) -> Response:
        auth = request.authorization
        got = f"{auth.username}:{auth.password}" if auth is not None else None
        self.key(request, f"{SEARX_USER}:{SEARX_PASSWORD}", got)
        results = [
            {"title": f"SearXNG result {i}", "url": url, "content": "attention"}
            for i, url in enumerate(page_urls(self.server, "searxng"))
        ]
        return json_answer({"results": results})

    def llm_failure(self, env: str) -> Callable[[Request], Response]:
        def answer(request: Request) -> Response:  # 500 echoing the key
            self.bearer(request, env)
            auth = request.headers["Authorization"]
            return json_answer({"error": {"message": f"upstream failed for {auth}"}}, 500)

        return answer

    def page(self, request: Request) -> Response:
        body = f"<html><body><article><h1>{request.path}</h1><p>{PARAGRAPH * 40}</p></article>"
        return Response(body + "</body></html>", content_type="text/html; charset=utf-8")

    def serve(self) -> dict[str, str]:
        """Route every endpoint; return the environment that points fanfuse at them."""
        routes = {
            "/google/customsearch/v1": self.google,
            "/brave/res/v1/web/search": self.brave,
            "/tavily/search": self.tavily,
            "/exa/search": self.exa,
            "/linkup/v1/search": self.linkup,
            "/builtin/chat/completions": self.builtin,
            "/perplexity/search": self.perplexity,
            "/searxng/search": self.searxng,
            "/rerank/chat/completions": self.llm_failure("FANFUSE_RERANK_LLM_API_KEY"),
            "/compress/chat/completions": self.llm_failure("FANFUSE_CONTENT_LLM_API_KEY"),
        }
        for path, handler in routes.items():
            self.server.expect_request(path).respond_with_handler(handler)
        for name in ("google", "linkup", "perplexity", "searxng"):
            for path in page_paths(name):
                self.server.expect_request(path).respond_with_handler(self.page)
        base = self.server.url_for("")
        searx = base.replace("://", f"://{SEARX_USER}:{quote(SEARX_PASSWORD, safe='')}@", 1)
        env = {
            **SECRETS,
            "FANFUSE_GOOGLE_CX": "cx-0",
            "FANFUSE_SEARXNG_BASE_URL": f"{searx}searxng",
            "FANFUSE_RERANK_LLM_BASE_URL": f"{base}rerank",
            "FANFUSE_CONTENT_LLM_BASE_URL": f"{base}compress",
            "FANFUSE_CONTENT_ALLOW_LOOPBACK": "true",
            "FANFUSE_CONTENT_TOKEN_BUDGET": "200",
            "FANFUSE_TAVILY_MAX_ATTEMPTS": "2",
            "FANFUSE_EXA_MAX_ATTEMPTS": "2",
        }
        for name in ("google", "brave", "tavily", "exa", "linkup", "builtin", "perplexity"):
            env[f"FANFUSE_{name.upper()}_BASE_URL"] = f"{base}{name}"
        return env


@pytest.fixture
def provider_env(server: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Providers]:
    for name in list(os.environ):
        if name.startswith("FANFUSE_") and name != "FANFUSE_CACHE_DIR":
            monkeypatch.delenv(name)
    providers = Providers(server)
    for name, value in providers.serve().items():
        monkeypatch.setenv(name, value)
    yield providers


REQUEST = {"query": "attention is all you need", "platform": PLATFORMS, "mode": "comprehensive"}
EXPECTED_FAILED = {"brave", "tavily", "exa"}


def store_text(db_path: Path) -> str:
    """Every row of every table of the store, and its files' raw bytes, as one text."""
    with sqlite3.connect(db_path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = [repr(row) for t in tables for row in db.execute(f'SELECT * FROM "{t}"')]
    assert {"tasks", "platforms", "contents", "cache", "health"} <= set(tables)
    raw = [p.read_bytes().decode("latin-1") for p in db_path.parent.glob(db_path.name + "*")]
    return "\n".join(rows + raw)


@pytest.fixture
def plain_log_records() -> Iterator[None]:
    """Records as logging makes them by default: the redaction an entry point installs for its
    whole process (`install_log_redaction`, done when the CLI is imported, maybe by an earlier
    test) is off, so what this test sees is the library's own doing, as an embedder gets it."""
    factory = logging.getLogRecordFactory()
    logging.setLogRecordFactory(logging.LogRecord)
    yield
    logging.setLogRecordFactory(factory)


async def test_a_full_search_leaves_no_secret_in_logs_documents_or_errors(
    provider_env: Providers,
    settings: Settings,
    runner: Runner,
    caplog: pytest.LogCaptureFixture,
    plain_log_records: None,
) -> None:
    caplog.set_level(logging.DEBUG)
    registry = Registry.from_settings(settings)
    async with EmbeddedRuntime(settings, registry=registry, runner=runner) as rt:
        view = await rt.search(REQUEST)
    # The search really ran, with every credential sent and every failure kind met.
    assert view.status is TaskStatus.PARTIAL  # three platforms fail, as planned
    assert provider_env.seen >= {*PLATFORMS, "perplexity", "rerank", "compress"}
    states = {r.name: r.state for r in view.platform_runs}
    assert {n for n, s in states.items() if s is PlatformState.FAILED} == EXPECTED_FAILED
    assert view.rerank is not None and view.rerank.applied is False
    errors = {r.name: r.error or "" for r in view.platform_runs}
    assert "401" in errors["brave"] and "429" in errors["tavily"] and "500" in errors["exa"]
    assert any(c.url and "searxng" in c.url for r in view.platform_runs for c in r.calls)

    # werkzeug's records are the double's access log: the provider's side, not fanfuse's.
    ours = [r for r in caplog.records if not r.name.startswith("werkzeug")]
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    logged = "\n".join(f"{formatter.format(r)} {r.args!r}" for r in ours)
    assert any(r.name == "httpx" for r in ours), "no request was logged: the check proves nothing"
    assert leaks(logged) == []
    assert leaks(view.model_dump_json()) == []
    assert leaks(store_text(settings.db_path)) == []


def test_the_cli_with_debug_logging_leaks_no_secret(
    provider_env: Providers, tmp_path: Path
) -> None:
    """The command, in its own process with every record at DEBUG on stderr: its output, its
    log and the store it wrote hold no secret; so does `fanfuse platforms`."""
    db = tmp_path / "cli" / "fanfuse.db"
    env = {**os.environ, "FANFUSE_DB_PATH": str(db), "COLUMNS": "200"}
    launcher = (
        "import logging, sys; logging.basicConfig(level=logging.DEBUG, stream=sys.stderr); "
        "from fanfuse.cli.main import app; app()"
    )
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    runs = [
        subprocess.run(
            [sys.executable, "-c", launcher, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        for args in (["search", "--request", str(request), "--json"], ["platforms"])
    ]
    search, platforms = runs
    assert search.returncode == 0, search.stderr[-2000:]
    view = json.loads(search.stdout)
    assert view["status"] == "partial"
    assert provider_env.seen >= {*PLATFORMS, "perplexity", "rerank", "compress"}
    assert "DEBUG" in search.stderr and "HTTP Request" in search.stderr  # logging was on
    assert platforms.returncode == 0 and "google" in platforms.stdout
    for run in runs:
        assert leaks(run.stdout) == []
        assert leaks(run.stderr) == []
    assert leaks(store_text(db)) == []
