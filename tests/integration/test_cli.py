"""The `fanfuse` command through typer's CliRunner, on a tiny corpus, with state kept in tmp."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import httpx
import pytest
from pydantic import ValidationError
from pytest_httpserver import HTTPServer
from typer.testing import CliRunner, Result

from fanfuse.auth import keys
from fanfuse.cli.keys import opened
from fanfuse.cli.main import app
from fanfuse.fronts.plain_text import platform_notes
from fanfuse.http.client import HttpSearchClient
from fanfuse.platforms import Registry
from fanfuse.retrieval import index_dir
from fanfuse.retrieval.bm25 import KIND as BM25_KIND
from fanfuse.retrieval.bm25 import Bm25Index
from fanfuse.retrieval.corpus import load_corpus
from fanfuse.retrieval.dense import KIND as DENSE_KIND
from fanfuse.retrieval.dense import DenseIndex
from fanfuse.settings import get_settings
from fanfuse.store.sqlite import SqliteStore
from fanfuse.wire.chain import MemberRole, MemberRun, MemberState
from fanfuse.wire.errors import InvalidRequest, Unavailable, Unreachable, problems_of
from fanfuse.wire.models import (
    BreakerState,
    CacheNote,
    FailureKind,
    LimitCut,
    PlatformHealth,
    PlatformRun,
    QueryFailure,
    TaskStatus,
    utcnow,
)
from fanfuse.wire.options import OptionUse
from fanfuse.wire.request import MAX_QUERIES, SearchRequest
from tests.support.fakes import task_view
from tests.support.health_checks import put_health
from tests.support.keys_checks import keys_round_trip

DOCS = {
    "D1": "Microwave radiation fed through a rectangular waveguide.",
    "D2": "The dielectric constant of liquids measured at microwave frequencies.",
    "D3": "A laser produces coherent light by stimulated emission.",
    "D4": "Semiconductor lasers emit light from a forward biased junction.",
    "D5": "Plasma waves propagate in the ionosphere.",
    "D6": "Error correcting codes protect data on noisy channels.",
    "D7": "A digital computer stores programs and data in memory.",
    "D8": "Band pass filters shape the phase and attenuation of signals.",
}
TOPICS = {"1": "microwave waveguide", "2": "laser light", "3": "noisy channels"}
QRELS = [("1", "D1"), ("1", "D2"), ("2", "D3"), ("2", "D4"), ("3", "D6")]

runner = CliRunner()


@pytest.fixture(autouse=True)
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Only the variables set here: no provider keys, extra or deployed platforms leak in."""
    for name in list(os.environ):
        if name.startswith("FANFUSE_"):
            monkeypatch.delenv(name)
    Bm25Index.clear_memo()
    DenseIndex.clear_memo()
    corpus = tmp_path / "lab.trec"
    corpus.write_text(
        "".join(
            f"<DOC>\n<DOCNO>{doc_id}</DOCNO>\n<TEXT>{text}</TEXT>\n</DOC>\n"
            for doc_id, text in DOCS.items()
        ),
        encoding="utf-8",
    )
    monkeypatch.setenv("FANFUSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FANFUSE_DB_PATH", str(tmp_path / "state" / "fanfuse.db"))
    monkeypatch.setenv("FANFUSE_DOCS_CORPUS", str(corpus))
    monkeypatch.setenv("FANFUSE_VECTORS_CORPUS", str(corpus))
    return corpus


def invoke(*args: str, stdin: str | None = None) -> Result:
    return runner.invoke(app, list(args), input=stdin)


def error_line(result: Result) -> str:
    """The one line a failing command prints (on stderr), without styling."""
    assert result.exit_code != 0, result.output
    assert result.stdout == ""
    lines = [line for line in click.unstyle(result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    return lines[0]


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_search_json_prints_the_completed_task(tmp_path: Path) -> None:
    task = ok_json(invoke("search", "microwave waveguide", "--platform", "docs", "--json"))
    assert task["status"] == "completed"
    assert task["queries"] == ["microwave waveguide"] and task["platforms"] == ["docs"]
    results = task["results"]
    assert results and len(results) <= task["request"]["max_results"]
    assert [r["rank"] for r in results] == list(range(1, len(results) + 1))
    top = results[0]
    assert top["url"] == load_corpus(tmp_path / "lab.trec").docs[0].url  # D1 has both words
    assert top["platform"] == "docs" and top["platforms"] == ["docs"]
    assert task["results_by_query"] == []
    [run] = task["platform_runs"]
    assert run["name"] == "docs" and run["state"] == "succeeded"
    assert (tmp_path / "state" / "fanfuse.db").is_file()  # FANFUSE_DB_PATH was used


def test_search_without_json_prints_a_results_table() -> None:
    result = invoke("search", "laser light", "-p", "docs", "-n", "2")
    assert result.exit_code == 0, result.output
    text = click.unstyle(result.stdout)
    assert "https://lab.local/doc/D3" in text
    assert "completed: Search completed: 2 results" in text


def test_unknown_platform_is_one_error_line_naming_the_available_ones() -> None:
    available = Registry().available()
    assert available == ["docs", "vectors"]
    line = error_line(invoke("search", "q", "--platform", "nope", "--json"))
    assert "'nope'" in line
    assert f"available: {', '.join(available)}" in line


def test_version_and_the_exit_codes_in_the_help() -> None:
    from fanfuse import __version__

    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout == f"fanfuse {__version__}\n"
    text = " ".join(invoke("--help").stdout.split())
    assert "Exit codes: 0 the search completed" in text and "2 the input was refused" in text


def test_too_many_queries_is_one_error_line() -> None:
    queries = [f"query {i}" for i in range(MAX_QUERIES + 1)]
    line = error_line(invoke("search", *queries, "--platform", "docs"))
    assert f"at most {MAX_QUERIES} queries" in line and f"got {len(queries)}" in line


def test_two_queries_give_one_list_each_and_a_fused_one() -> None:
    queries = ["microwave", "laser"]
    task = ok_json(invoke("search", *queries, "-p", "docs", "--json"))
    assert task["status"] == "completed"
    by_query = task["results_by_query"]
    assert [entry["query"] for entry in by_query] == queries
    microwave, laser = ([r["url"] for r in entry["results"]] for entry in by_query)
    assert microwave and laser and not set(microwave) & set(laser)
    assert {r["url"] for r in task["results"]} == set(microwave) | set(laser)


@pytest.mark.slow
def test_two_queries_over_docs_and_vectors() -> None:
    queries = ["microwave waveguide", "coherent light"]
    task = ok_json(invoke("search", *queries, "-p", "docs, vectors", "-n", "3", "--json"))
    assert task["status"] == "completed" and task["platforms"] == ["docs", "vectors"]
    assert [entry["query"] for entry in task["results_by_query"]] == queries
    for entry in task["results_by_query"]:
        assert 0 < len(entry["results"]) <= 3
    assert any(len(r["platforms"]) == 2 for r in task["results"])  # found by both
    assert {run["name"]: run["state"] for run in task["platform_runs"]} == {
        "docs": "succeeded",
        "vectors": "succeeded",
    }


def test_platforms_shows_each_platforms_health(tmp_path: Path) -> None:
    """The breaker as the store holds it (breaker.py): state, reason, retry time, latency."""
    retry_at = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    store = SqliteStore(tmp_path / "state" / "fanfuse.db")
    suspended = PlatformHealth(
        name="docs",
        latency_s=0.25,
        samples=2,
        updated_at=retry_at,
        state=BreakerState.OPEN,
        reason=FailureKind.RATE_LIMITED,
        retry_at=retry_at,
        consecutive_failures=1,
    )
    put_health(store, suspended)
    store.close()
    rows = {row["name"]: row for row in ok_json(invoke("platforms", "--json"))}
    assert PlatformHealth.model_validate(rows["docs"]["health"]) == suspended
    assert rows["vectors"]["health"] is None
    result = invoke("platforms")
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.stdout.splitlines() if line.startswith("docs ")]
    assert " open " in line and " 0.25s " in line
    words = " ".join(result.stdout.split())  # the notes under the table wrap at spaces
    assert "docs: suspended (rate limited) until 2030-01-01 12:00:00Z" in words
    # under the table: each provider's pace across the deployment's workers (pacing.py)
    assert "paced across workers, calls/s: google 1.67, perplexity 3," in words
    assert "brave 50" in words and "arxiv 0.333" in words and "searxng" not in words.split(":")[-1]


def test_platforms_json_lists_availability_and_reasons() -> None:
    rows = ok_json(invoke("platforms", "--json"))
    assert [row["name"] for row in rows] == Registry().names()
    by_name = {row["name"]: row for row in rows}
    for name in ("docs", "vectors"):
        assert by_name[name] == {
            "name": name,
            "available": True,
            "reason": None,
            "health": None,
            "max_concurrency": None,  # local: no provider calls
            "rate_limit": None,
            "pace_per_second": None,  # nor any pace
            "fallbacks": [],
        }
    others = [row for row in rows if row["name"] not in ("docs", "vectors")]
    assert others
    for row in others:
        assert row["available"] is False
        assert isinstance(row["reason"], str) and row["reason"], row
    # Web platforms say which settings they miss, by their environment variable.
    assert "FANFUSE_GOOGLE_API_KEY" in by_name["google"]["reason"]
    # Each provider's calls in flight, and the documented limit they derive from.
    assert by_name["brave"]["max_concurrency"] == 64
    assert "50 requests a second" in by_name["brave"]["rate_limit"]
    # The pace held across the deployment's workers, and the deployment's default chain.
    assert by_name["brave"]["pace_per_second"] == 50.0
    assert by_name["searxng"]["pace_per_second"] is None  # self-hosted: not paced
    assert by_name["builtin"]["fallbacks"] == ["perplexity"]


def test_index_without_dense_builds_the_bm25_cache(env: Path, tmp_path: Path) -> None:
    result = invoke("index", str(env), "--no-dense")
    assert result.exit_code == 0, result.output
    corpus, cache = load_corpus(env), tmp_path / "cache"
    assert (index_dir(corpus, BM25_KIND, cache) / "meta.json").is_file()
    assert not index_dir(corpus, DENSE_KIND, cache).exists()


@pytest.mark.slow
def test_index_builds_both_caches(env: Path, tmp_path: Path) -> None:
    result = invoke("index", str(env))
    assert result.exit_code == 0, result.output
    corpus, cache = load_corpus(env), tmp_path / "cache"
    assert (index_dir(corpus, BM25_KIND, cache) / "meta.json").is_file()
    assert (index_dir(corpus, DENSE_KIND, cache) / "embeddings.npy").is_file()


def test_index_of_a_missing_path_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert error_line(invoke("index", "nowhere")) == "error: nowhere: no such file or folder"


def write_topics_and_qrels(folder: Path) -> tuple[Path, Path]:
    topics, qrels = folder / "topics.trec", folder / "qrels"
    topics.write_text(
        "".join(f"<top>\n<num>{q}</num><title>{t}</title>\n</top>\n" for q, t in TOPICS.items()),
        encoding="utf-8",
    )
    qrels.write_text("".join(f"{q} 0 {d} 1\n" for q, d in QRELS), encoding="utf-8")
    return topics, qrels


@pytest.mark.slow
def test_eval_json_prints_only_the_runs(env: Path, tmp_path: Path) -> None:
    topics, qrels = write_topics_and_qrels(tmp_path)
    args = ["--corpus", str(env), "--queries", str(topics), "--qrels", str(qrels)]
    report = ok_json(invoke("eval", "--json", *args))
    assert list(report) == ["runs"]
    runs = report["runs"]
    assert {"docs", "vectors"} <= {run["name"] for run in runs}
    assert sum(run["default"] for run in runs) == 1
    for run in runs:
        assert set(run) == {"name", "kind", "default", "depth", "metrics", "comparisons"}
        assert run["kind"] in ("platform", "fuser", "reranker", "requery", "mode")
        assert list(run["metrics"]) == ["nDCG@10", "AP@100", "RR@10", "R@100"]


def test_eval_with_a_missing_corpus_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_topics_and_qrels(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["--corpus", "missing.trec", "--queries", "topics.trec", "--qrels", "qrels"]
    line = error_line(invoke("eval", "--json", *args))
    assert line == "error: missing.trec: no such file or folder"


def test_a_long_error_message_stays_on_one_line(tmp_path: Path) -> None:
    missing = tmp_path / ("deeply-nested-folder-" * 6) / "corpus.trec"
    assert error_line(invoke("index", str(missing))) == f"error: {missing}: no such file or folder"


# -- search options, --request, the results table, an unreachable endpoint -----------------------


def test_domain_options_reach_the_request_and_are_recorded_per_platform() -> None:
    # The docs platform's URLs are on lab.local: including only example.org removes them all.
    include = ["--include-domain", "example.org", "--include-domain", "Example.NET."]
    task = ok_json(invoke("search", "laser light", "-p", "docs", *include, "--json"))
    assert task["request"]["include_domains"] == ["example.org", "example.net"]
    [run] = task["platform_runs"]
    use = run["options"]["include_domains"]
    assert use["applied"] == "post_filter" and use["removed"] > 0
    assert task["filtered"] == {"include_domains": use["removed"]}
    assert task["results"] == []

    exclude = ["--exclude-domain", "lab.local"]
    task = ok_json(invoke("search", "laser light", "-p", "docs", *exclude, "--json"))
    assert task["request"]["exclude_domains"] == ["lab.local"]
    assert task["platform_runs"][0]["options"]["exclude_domains"]["removed"] > 0
    assert task["results"] == []


def test_every_other_option_reaches_the_request() -> None:
    args = ["--time-range", "week", "--country", "de", "--safesearch", "strict"]
    args += ["--timeout", "5", "--cache", "bypass"]
    task = ok_json(invoke("search", "laser", "-p", "docs", *args, "--json"))
    request = task["request"]
    assert (request["time_range"], request["country"], request["safesearch"]) == (
        "week",
        "DE",
        "strict",
    )
    assert (request["timeout_s"], request["cache"]) == (5.0, "bypass")
    [run] = task["platform_runs"]
    assert set(run["options"]) == {"time_range", "country", "safesearch"}
    assert run["options"]["country"]["applied"] == "not_applied"  # no filter can enforce it
    assert run["cache"]["mode"] == "bypass"


def http_message(**fields: Any) -> str:
    """The message of the HTTP API's 400 for this request body."""
    with pytest.raises(ValidationError) as caught:
        SearchRequest.model_validate({"query": "laser", **fields})
    return str(InvalidRequest(problems_of(caught.value)))


@pytest.mark.parametrize(
    ("args", "field", "value"),
    [
        (["--time-range", "fortnight"], "time_range", "fortnight"),
        (["--country", "XX"], "country", "XX"),
        (["--safesearch", "very"], "safesearch", "very"),
        (["--cache", "never"], "cache", "never"),
        (["--timeout", "soon"], "timeout_s", "soon"),
        (["--timeout", "0.1"], "timeout_s", 0.1),
        (["--include-domain", "https://example.org/"], "include_domains", ["https://example.org/"]),
        (["--exclude-domain", "a b"], "exclude_domains", ["a b"]),
    ],
)
def test_a_bad_option_value_is_the_http_apis_message_naming_the_field(
    args: list[str], field: str, value: Any
) -> None:
    result = invoke("search", "laser", "-p", "docs", *args)
    assert result.exit_code == 2
    line = error_line(result)
    assert line == f"error: {http_message(**{field: value})}"
    assert line.startswith(f"error: {field}: ")


def write_request(folder: Path, body: Any) -> Path:
    path = folder / "request.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


REQUEST = {
    "query": ["laser", "microwave"],
    "platform": "docs",
    "max_results": 3,
    "exclude_domains": ["example.org"],
    "time_range": "year",
}


def test_request_file_is_the_whole_body(tmp_path: Path) -> None:
    path = write_request(tmp_path, REQUEST)
    task = ok_json(invoke("search", "--request", str(path), "--json"))
    assert task["queries"] == ["laser", "microwave"] and task["platforms"] == ["docs"]
    assert task["request"]["max_results"] == 3
    assert task["request"]["exclude_domains"] == ["example.org"]
    assert task["request"]["time_range"] == "year"


def test_queries_and_options_given_on_the_command_line_replace_the_files_fields(
    tmp_path: Path,
) -> None:
    path = write_request(tmp_path, REQUEST)
    args = ["-n", "1", "--exclude-domain", "example.net", "--json"]
    task = ok_json(invoke("search", "waveguide", "--request", str(path), *args))
    assert task["queries"] == ["waveguide"]  # not the file's two
    request = task["request"]
    assert request["max_results"] == 1
    assert request["exclude_domains"] == ["example.net"]  # a list is replaced, not extended
    assert request["time_range"] == "year" and request["platform"] == ["docs"]  # kept


def test_request_from_stdin() -> None:
    args = ["search", "--request", "-", "--cache", "bypass", "--json"]
    task = ok_json(invoke(*args, stdin=json.dumps(REQUEST)))
    assert task["queries"] == REQUEST["query"]
    assert task["request"]["cache"] == "bypass"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("query: laser", "not JSON (Expecting value: line 1 column 1 (char 0))"),
        ('["laser"]', "expected a JSON object (a request body), got an array"),
    ],
)
def test_a_request_file_that_is_not_a_json_object_is_one_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, problem: str
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("body.json").write_text(text, encoding="utf-8")
    assert error_line(invoke("search", "--request", "body.json")) == f"error: body.json: {problem}"
    line = error_line(invoke("search", "--request", "-", stdin=text))
    assert line == f"error: stdin: {problem}"


def test_a_request_file_with_an_unknown_field_or_no_query_is_refused_like_the_api(
    tmp_path: Path,
) -> None:
    path = write_request(tmp_path, {"query": "laser", "colour": "blue"})
    assert error_line(invoke("search", "--request", str(path))) == "error: colour: unknown field"
    path = write_request(tmp_path, {"platform": "docs"})
    assert error_line(invoke("search", "--request", str(path))) == "error: query: field required"


LONG_URL = "https://lab.local/" + "/".join(f"section-{i}-of-a-rather-deep-path" for i in range(6))


def result_column(text: str) -> str:
    """The table's third column, its lines joined: what a reader sees, without the wrapping."""
    cells = [line.split("│")[3].strip() for line in text.splitlines() if line.count("│") == 5]
    return "".join(cells)


def test_the_table_shows_a_long_url_in_full_and_the_snippet_at_a_narrow_width(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "long.jsonl"
    record = {
        "id": "L1",
        "title": "Klystron",
        "text": "A klystron amplifies microwave signals.",
        "url": LONG_URL,
    }
    corpus.write_text(json.dumps(record) + "\n", encoding="utf-8")
    monkeypatch.setenv("FANFUSE_DOCS_CORPUS", str(corpus))
    monkeypatch.setenv("COLUMNS", "60")
    result = invoke("search", "klystron", "-p", "docs")
    assert result.exit_code == 0, result.output
    text = click.unstyle(result.stdout)
    assert max(len(line) for line in text.splitlines()) <= 60
    assert "…" not in text and "..." not in text
    assert LONG_URL not in text  # it had to be wrapped...
    column = result_column(text)
    assert f"Klystron{LONG_URL}Aklystron" in column.replace(" ", "")  # ...yet is all there


def test_the_second_identical_search_says_cache_hit() -> None:
    args = ["search", "laser light", "-p", "docs", "--exclude-domain", "example.org"]
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    notes = [line for line in click.unstyle(first.stdout).splitlines() if line.startswith("docs:")]
    assert notes == ["docs: filtered exclude_domains -0 (post_filter)"]
    second = invoke(*args)
    assert second.exit_code == 0, second.output
    notes = [line for line in click.unstyle(second.stdout).splitlines() if line.startswith("docs:")]
    [note] = notes
    assert note.startswith("docs: filtered exclude_domains -0 (post_filter); cache hit (age ")


def test_platform_notes_say_filters_cache_and_failed_queries() -> None:
    run = PlatformRun(
        task_id="t",
        name="brave",
        index=1,
        of=1,
        options={
            "include_domains": OptionUse(applied="post_filter", removed=3),
            "time_range": OptionUse(applied="native"),
            "country": OptionUse(applied="not_applied"),
        },
        cache=CacheNote(state="partial", mode="auto", age_s=42.4, hits=1, misses=1),
        failed_queries=[
            QueryFailure(platform="brave", query_index=1, query="q2", error="HTTP 500")
        ],
        limits={"page_fetches": LimitCut(cap=66, used=66, skipped=434)},
    )
    assert platform_notes(run) == [
        "brave: filtered include_domains -3 (post_filter), time_range native, country not applied;"
        " cache partial: 1 hit, 1 searched (age 42s); capped page fetches at 66 (434 skipped)",
        "brave: query 2 failed: HTTP 500",
    ]
    quiet = run.model_copy(
        update={"options": {}, "failed_queries": [], "cache": None, "limits": {}}
    )
    assert platform_notes(quiet) == []


def test_platform_notes_say_which_chain_member_answered_and_why_the_others_did_not() -> None:
    members = [
        MemberRun(
            name="google",
            role=MemberRole.PRIMARY,
            state=MemberState.FAILED,
            reason="HTTP 429: slow down; gave up after 3 attempt(s) on " + "x" * 200,
        ),
        MemberRun(name="brave", role=MemberRole.FALLBACK, state=MemberState.ANSWERED),
    ]
    run = PlatformRun(
        task_id="t",
        name="google",
        index=1,
        of=1,
        chain=["google", "brave"],
        members=members,
        answered_by=["brave"],
    )
    [note] = platform_notes(run)
    assert note.startswith("google: answered by brave (google failed: HTTP 429: slow down; ")
    assert note.endswith("…)") and len(note) < 140
    answered = MemberRun(name="google", role=MemberRole.PRIMARY, state=MemberState.ANSWERED)
    own = run.model_copy(update={"members": [answered], "answered_by": ["google"]})
    assert platform_notes(own) == []  # the first member answered alone: nothing to say


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_an_unreachable_endpoint_is_one_line_naming_the_address() -> None:
    url = f"http://127.0.0.1:{closed_port()}/start_search"
    result = invoke("search", "laser", "--endpoint", url)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert error_line(result) == f"error: cannot reach {url}: connection refused"


def test_an_endpoint_that_is_not_fanfuse_is_one_line_naming_it(server: HTTPServer) -> None:
    server.expect_request("/start_search").respond_with_data("<html>hi</html>", 200)
    url = server.url_for("/start_search")
    line = error_line(invoke("search", "laser", "--endpoint", url, "--json"))
    assert line.startswith(f"error: {url} answered HTTP 200 but not with a fanfuse Accepted")


def test_a_connect_timeout_names_the_address() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("timed out", request=request)

    async def search() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as http:
            await HttpSearchClient("http://127.0.0.1:9/start_search", http=http).search({})

    with pytest.raises(Unreachable) as caught:
        asyncio.run(search())
    assert str(caught.value) == "cannot reach http://127.0.0.1:9/start_search: timed out connecting"
    assert isinstance(caught.value, Unavailable)


# -- API keys: `fanfuse keys`, and `search --endpoint` sending one -----------------------------


def test_keys_create_list_revoke_in_the_runtimes_sqlite_store(tmp_path: Path) -> None:
    created = invoke("keys", "create", "--owner", "alice", "--label", "ci", "--rate-per-minute=7")
    assert created.exit_code == 0, created.output
    plaintext = created.stdout.strip()
    key_id, secret = keys.parse_key(plaintext) or ("", "")
    assert key_id and created.stdout == plaintext + "\n"  # the key alone: scriptable
    where = f"SQLite {tmp_path / 'state' / 'fanfuse.db'}"
    assert f"key {key_id} for alice stored in {where}" in click.unstyle(created.stderr)
    other = invoke("keys", "create", "--owner", "bob", "--max-in-flight", "2").stdout.strip()

    listed = ok_json(invoke("keys", "list", "--json"))
    assert [(k["key_id"], k["owner"]) for k in listed] == [
        (key_id, "alice"),
        (other.split("_")[1], "bob"),
    ]
    assert listed[0]["label"] == "ci" and listed[0]["rate_per_minute"] == 7
    assert listed[0]["max_in_flight"] is None and listed[1]["max_in_flight"] == 2
    assert listed[0]["revoked_at"] is None and listed[0]["created_at"]
    table = invoke("keys", "list")
    for shown in (invoke("keys", "list", "--json"), table):
        assert secret not in shown.output and keys.digest(secret) not in shown.output
        assert "sha256" not in shown.output
    assert key_id in table.stdout and "default" in table.stdout

    revoked = invoke("keys", "revoke", key_id)
    assert revoked.exit_code == 0, revoked.output
    assert f"revoked key {key_id} of alice" in revoked.stdout
    assert ok_json(invoke("keys", "list", "--json"))[0]["revoked_at"] is not None
    again = invoke("keys", "revoke", key_id)
    assert again.exit_code == 0 and "already revoked" in again.stdout
    store = SqliteStore(tmp_path / "state" / "fanfuse.db")
    record = store.get_key(key_id)
    store.close()
    assert record is not None and record.owner == "alice" and record.revoked_at is not None


def test_keys_round_trip_on_sqlite_as_on_every_store(tmp_path: Path) -> None:
    """tests/support/keys_checks.py, also run on Firestore (tests/e2e) and DynamoDB (tests/aws)."""
    db = tmp_path / "state" / "fanfuse.db"
    env = {"FIRESTORE_EMULATOR_HOST": None, "FANFUSE_CLOUD": None}
    for flags in ([], ["--sqlite"]):
        keys_round_trip(env, flags, f"SQLite {db}", lambda: SqliteStore(db))


def test_keys_revoke_takes_the_whole_key_as_create_printed_it(tmp_path: Path) -> None:
    plaintext, record = keys.new_key("team", "", None, None, utcnow())
    store = SqliteStore(tmp_path / "state" / "fanfuse.db")
    store.put_key(record)
    store.close()
    result = invoke("keys", "revoke", plaintext)
    assert result.exit_code == 0, result.output
    assert f"revoked key {record.key_id} of team" in result.stdout
    assert plaintext not in result.output
    store = SqliteStore(tmp_path / "state" / "fanfuse.db")
    stored = store.get_key(record.key_id)
    store.close()
    assert stored is not None and stored.revoked_at is not None


def test_keys_revoke_refuses_what_is_not_a_stored_key_id_without_echoing_it() -> None:
    assert error_line(invoke("keys", "revoke", "0123456789abcdef")).startswith(
        "error: no key 0123456789abcdef in SQLite "
    )
    pasted, _ = keys.new_key("x", "", None, None, utcnow())
    garbled = pasted[:-1] + "!"
    line = error_line(invoke("keys", "revoke", garbled))
    assert line.startswith("error: not a key id nor a key") and garbled not in line
    unknown = error_line(invoke("keys", "revoke", pasted))  # a whole key: its id is looked up
    assert unknown.startswith("error: no key ") and pasted not in unknown
    empty = invoke("keys", "create", "--owner", " ")
    assert error_line(empty) == "error: --owner must not be empty"
    for bad in ("-1", "nan", "inf"):
        refused = invoke("keys", "create", "--owner", "x", "--daily-budget-usd", bad)
        assert refused.exit_code == 2 and "daily-budget-usd" in refused.output, refused.output


def test_keys_go_to_firestore_with_the_flag_or_the_emulator_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fanfuse.store.firestore import FirestoreStore

    monkeypatch.setenv("FANFUSE_PROJECT", "demo-keys")
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:9")  # never contacted here
    for flag in (None, True):
        with opened(flag) as (store, where):
            assert isinstance(store, FirestoreStore)
            assert where == "Firestore demo-keys/searches_keys"
    with opened(False) as (store, where):
        assert isinstance(store, SqliteStore)
    monkeypatch.delenv("FIRESTORE_EMULATOR_HOST")
    get_settings.cache_clear()  # the settings of a process started now
    with opened(None) as (store, where):
        assert isinstance(store, SqliteStore) and where.startswith("SQLite ")


def _completed(task_id: str) -> dict[str, Any]:
    view = task_view(task_id, "alice").model_copy(update={"status": TaskStatus.COMPLETED})
    return view.model_dump(mode="json")


@pytest.mark.parametrize("how", ["option", "env"])
def test_search_endpoint_sends_the_api_key_on_every_call(
    server: HTTPServer, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    key, _ = keys.new_key("alice", "", None, None, utcnow())
    sent = {keys.API_KEY_HEADER: key}
    accepted = {"task_id": "t1", "status": "pending", "status_url": server.url_for("/status/t1")}
    server.expect_request("/start_search", method="POST", headers=sent).respond_with_json(
        accepted, 202
    )
    server.expect_request("/status/t1", headers=sent).respond_with_json(_completed("t1"))
    url = server.url_for("/start_search")
    if how == "env":
        monkeypatch.setenv("FANFUSE_API_KEY", key)
        result = invoke("search", "laser", "--endpoint", url, "--json")
    else:
        result = invoke("search", "laser", "--endpoint", url, "--json", "--api-key", key)
    assert ok_json(result)["status"] == "completed"
    assert key not in result.stderr
    assert len(server.log) == 2


def test_search_endpoint_without_a_key_says_the_apis_401_and_never_prints_a_key(
    server: HTTPServer,
) -> None:
    message = "no credentials: send an API key as X-Api-Key (`fanfuse keys create`)"
    body = {"error": "unauthorized", "message": message, "problems": []}
    server.expect_request("/start_search").respond_with_json(body, 401)
    hint = (
        "give a key with --api-key KEY or FANFUSE_API_KEY=KEY (`fanfuse serve` and `fanfuse "
        "dev` print one on their `api_key` line; `fanfuse keys create` makes one)"
    )
    line = error_line(invoke("search", "laser", "--endpoint", server.url_for("/start_search")))
    assert line == f"error: {message}; {hint}"
    wrong, _ = keys.new_key("x", "", None, None, utcnow())
    body["message"] = "X-Api-Key: not a valid API key"
    server.clear()
    server.expect_request("/start_search").respond_with_json(body, 401)
    url = server.url_for("/start_search")
    result = invoke("search", "q", "--endpoint", url, "--api-key", wrong)
    assert error_line(result) == f"error: X-Api-Key: not a valid API key; {hint}"
    assert wrong not in result.output


@pytest.mark.parametrize("given", ["", "/"])
def test_search_endpoint_takes_the_servers_base_url(server: HTTPServer, given: str) -> None:
    """`fanfuse serve`'s printed `url` (or a deployment's base URL) works as --endpoint: the
    client posts to its /start_search, not to the page at its root."""
    accepted = {"task_id": "t1", "status": "pending", "status_url": server.url_for("/status/t1")}
    server.expect_request("/start_search", method="POST").respond_with_json(accepted, 202)
    server.expect_request("/status/t1").respond_with_json(_completed("t1"))
    base = server.url_for("/").rstrip("/") + given
    assert ok_json(invoke("search", "laser", "--endpoint", base, "--json"))["status"] == (
        "completed"
    )
    assert [entry[0].path for entry in server.log] == ["/start_search", "/status/t1"]


# -- budgets: `--max-cost-usd`, `--budget`, and the receipt ------------------------------------


def test_search_over_its_cost_cap_is_refused_naming_the_field_and_trim_prints_the_receipt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`docs` priced at a dollar a request by the deployment (FANFUSE_PRICES), `vectors` free:
    over the cap the command fails like a 400; with `--budget trim` it runs on `vectors` alone
    and says what was dropped."""
    monkeypatch.setenv("FANFUSE_PRICES", '{"docs": {"per_request_usd": 1}}')
    refused = invoke("search", "laser", "-p", "docs,vectors", "--max-cost-usd", "0.5")
    assert refused.exit_code == 2
    assert error_line(refused) == (
        "error: max_cost_usd: the estimated cost $1 (docs $1) is over max_cost_usd $0.5; to "
        'fit: leave out docs ($0); send budget: "trim" to drop the dearest platforms'
    )
    bad = invoke("search", "laser", "--max-cost-usd", "lots")
    assert error_line(bad).startswith("error: max_cost_usd: ")
    trimmed = invoke(
        "search", "laser", "-p", "docs,vectors", "--max-cost-usd", "0.5", "--budget", "trim"
    )
    assert trimmed.exit_code == 0, trimmed.output
    assert (
        "cost $0 (no paid call) (estimate $0; cap $0.5 from the request, trim: dropped docs)"
        in " ".join(trimmed.stdout.split())  # wrapped at the terminal's width
    )
