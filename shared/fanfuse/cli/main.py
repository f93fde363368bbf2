"""`fanfuse search | platforms | index | eval | dev | serve | mcp | openapi | keys | stats |
bench | trace | config`: a thin shell over the service."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fanfuse.cli.body import number_or_text, read_request
from fanfuse.cli.keys import (
    ApiKeyOption,
    AudienceOption,
    AuthOption,
    AwsRegionOption,
    GoogleCredentialsOption,
    IdTokenFileOption,
    client_auth,
    explained,
)
from fanfuse.cli.search_view import ProgressView, console, fail, out, progress_bars, render_results
from fanfuse.support.redact import install_log_redaction
from fanfuse.wire.errors import FanfuseError
from fanfuse.wire.models import TaskView

if TYPE_CHECKING:
    from fanfuse.auth.outbound import ClientAuth

install_log_redaction()  # whatever logging the command turns on, no record shows a secret

# Plain click help, not rich's panels: click wraps the help text beside the option names and
# never cuts a name, where the panels cut names to fit 80 columns (and a pipe is 80 columns).
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None)

EXIT_CODES = """Exit codes: 0 the search completed (or partly: some platforms failed), 1 it failed
or was cancelled (or the service could not be reached), 2 the input was refused (the message
names the field), 130 interrupted."""


def _print_version(value: bool) -> None:
    if value:
        from fanfuse.support.version import __version__

        typer.echo(f"fanfuse {__version__}")
        raise typer.Exit()


@app.callback(epilog=EXIT_CODES)
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
) -> None:
    """One search request, many platforms, one fused answer.

    Start with `fanfuse index ~/notes` and `fanfuse search "words" -p notes`, or search the
    bundled corpus: `fanfuse search "microwave dielectric constant"`. Docs: README.md.
    """
    from fanfuse.settings import get_settings

    # Each invocation is a composition root: its commands share one settings tree, read now
    # (a program that runs several, as tests do with CliRunner, gets each its own environment).
    get_settings.cache_clear()


@app.command()
def search(
    query: Annotated[
        list[str] | None, typer.Argument(help="one query, or up to 5 (else the --request file's)")
    ] = None,
    platform: Annotated[
        str | None, typer.Option("--platform", "-p", help="all (default) | name | a, b")
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", "-m", help="fast | balanced (default) | comprehensive"),
    ] = None,
    max_results: Annotated[
        int | None, typer.Option("--max-results", "-n", help="default 10")
    ] = None,
    content: Annotated[
        bool | None, typer.Option("--content/--no-content", help="fetch page content")
    ] = None,
    fusion: Annotated[str | None, typer.Option(help="rrf | score | concat")] = None,
    language: Annotated[str | None, typer.Option()] = None,
    include_domain: Annotated[
        list[str] | None,
        typer.Option("--include-domain", help="keep only this host and its subdomains; repeat"),
    ] = None,
    exclude_domain: Annotated[
        list[str] | None, typer.Option("--exclude-domain", help="drop this host; repeat")
    ] = None,
    time_range: Annotated[str | None, typer.Option(help="day | week | month | year")] = None,
    country: Annotated[str | None, typer.Option(help="ISO 3166-1 alpha-2, e.g. US")] = None,
    safesearch: Annotated[str | None, typer.Option(help="off | moderate | strict")] = None,
    timeout: Annotated[
        str | None, typer.Option(help="time budget in seconds (timeout_s), 0.5 to the deadline")
    ] = None,
    cache: Annotated[str | None, typer.Option(help="auto (default) | bypass | only")] = None,
    max_cost_usd: Annotated[
        str | None, typer.Option(help="the most the search may cost, USD (max_cost_usd)")
    ] = None,
    budget: Annotated[
        str | None, typer.Option(help="over max_cost_usd: refuse (default) | trim")
    ] = None,
    request: Annotated[
        str | None,
        typer.Option(
            "--request",
            help="a JSON request body, as the HTTP API takes it (- for stdin); options given "
            "here replace its fields, positional queries its query",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the final task as JSON")] = False,
    endpoint: Annotated[
        str | None,
        typer.Option(
            help="search through a server: `fanfuse serve`'s URL, a deployment's base URL or "
            "its start_search URL"
        ),
    ] = None,
    api_key: ApiKeyOption = None,
    auth: AuthOption = None,
    audience: AudienceOption = None,
    google_credentials: GoogleCredentialsOption = None,
    id_token_file: IdTokenFileOption = None,
    aws_region: AwsRegionOption = None,
) -> None:
    """Search the platforms: live progress, then the fused results.

    --request FILE (- for stdin): an HTTP API request body; queries and options given here win.
    """
    # Values go to the request model unchecked: a bad one gets the HTTP API's 400 message,
    # naming the field, from the one validation both runtimes share.
    payload = read_request(request) if request is not None else {}
    given = {
        "query": (query if len(query) > 1 else query[0]) if query else None,
        "platform": platform,
        "mode": mode,
        "max_results": max_results,
        "include_content": content,
        "fusion": fusion,
        "language": language,
        "include_domains": include_domain or None,
        "exclude_domains": exclude_domain or None,
        "time_range": time_range,
        "country": country,
        "safesearch": safesearch,
        "timeout_s": number_or_text(timeout),
        "cache": cache,
        "max_cost_usd": number_or_text(max_cost_usd),
        "budget": budget,
    }
    payload.update({name: value for name, value in given.items() if value is not None})
    credentials = client_auth(
        auth, api_key, audience, google_credentials, id_token_file, aws_region
    )
    try:
        view = asyncio.run(_run_search(payload, endpoint, credentials, show_progress=not as_json))
    except FanfuseError as exc:
        raise fail(explained(exc, endpoint), 2 if exc.status_code < 500 else 1) from None
    except KeyboardInterrupt:  # the search was cancelled on the way out (_run_search)
        raise fail("interrupted: the search was cancelled", 130) from None
    if as_json:
        sys.stdout.write(view.model_dump_json(indent=2) + "\n")
    else:
        render_results(view)
    if view.status.value in ("failed", "cancelled"):
        raise typer.Exit(1)


async def _run_search(
    payload: dict[str, Any], endpoint: str | None, credentials: ClientAuth, show_progress: bool
) -> TaskView:
    """One search on the runtime `--endpoint` names (else in this process, not resident: it
    resumes nothing), through the backend the MCP tools use too; Ctrl-C cancels it."""
    from fanfuse.http.backend import open_backend

    auth = credentials.build(endpoint) if endpoint else None
    with progress_bars(show_progress) as bars:
        async with open_backend(endpoint, auth=auth, resident=False) as backend:
            return await backend.search(payload, None, ProgressView(bars))


@app.command()
def platforms(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the platforms: available or why not, and their health.

    Each one's health in the embedded store: breaker state, reason, retry time, measured warm
    latency and cold start; the pace each provider is held to across workers."""
    from fanfuse.cli.search_view import pace_line, platforms_table
    from fanfuse.platforms import Registry
    from fanfuse.platforms.corpora import descriptions
    from fanfuse.settings import get_settings
    from fanfuse.store.sqlite import SqliteStore

    settings = get_settings()
    store = SqliteStore(settings.db_path)
    try:
        chains = {name: chain.fallbacks for name, chain in settings.chains.items()}
        rows = Registry.from_settings(settings).describe(store.get_health(), chains)
    finally:
        store.close()
    if as_json:
        data = [row.model_dump(mode="json") for row in rows]
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    out.print(platforms_table(rows, descriptions(settings.cache_dir)))
    paced = pace_line(rows)
    if paced is not None:
        out.print(paced, highlight=False, markup=False)


@app.command("eval")
def evaluate(
    corpus: Annotated[Path | None, typer.Option(help="TREC corpus (default: Vaswani)")] = None,
    queries: Annotated[Path | None, typer.Option(help="TREC topics")] = None,
    qrels: Annotated[Path | None, typer.Option(help="TREC qrels")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Score docs, vectors and every fuser (ir-measures).

    nDCG@10, AP@100, RR@10 and R@100 against relevance judgements, Vaswani's by default."""
    from fanfuse.cli.search_view import phases
    from fanfuse.tools.evaluation.evaluate import render_report, run_evaluation

    try:
        with phases("starting", show=not as_json) as step:
            report = run_evaluation(corpus, queries, qrels, show_progress=not as_json, step=step)
    except (ValueError, OSError) as exc:
        raise fail(str(exc)) from None
    for note in report.notes:
        console.print(f"note: {note}", highlight=False)
    if as_json:
        sys.stdout.write(report.model_dump_json(include={"runs"}, indent=2) + "\n")
    else:
        out.print(render_report(report))


@app.command()
def dev(
    platform: Annotated[
        str,
        typer.Option(
            "--platform",
            "-p",
            help="platforms the stack serves (queues, deployed): all available, or a, b",
        ),
    ] = "all",
    firestore_port: Annotated[int | None, typer.Option(help="default: a free port")] = None,
    start_search_port: Annotated[int | None, typer.Option(help="default: a free port")] = None,
    cloud: Annotated[
        str,
        typer.Option(
            help="gcp: the Firestore and Cloud Tasks emulators and the functions; aws: moto's "
            "server (DynamoDB, SQS) and the Lambda handlers run locally (docs/aws.md)",
        ),
    ] = "gcp",
    app_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="gcp: a browser app on this origin (http://127.0.0.1:8000) may call the "
            "functions as a user of the Firebase emulators (CORS, the emulators' unsigned ID "
            "tokens for the demo- project): examples/web-app/README.md",
        ),
    ] = None,
    rules: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            dir_okay=False,
            help="gcp: Firestore security rules to load (infra/firestore.rules)",
        ),
    ] = None,
) -> None:
    """Run the local cloud stack: emulators and functions.

    All on 127.0.0.1, until Ctrl-C or SIGTERM."""
    import time

    from fanfuse.platforms import Registry
    from fanfuse.settings import get_settings
    from fanfuse.tools.devstack import stack as devstack
    from fanfuse.tools.devstack.aws_stack import AwsStack
    from fanfuse.tools.devstack.stack import LocalStack
    from fanfuse.wire.request import split_platforms

    origins = app_origin or []
    if problem := devstack.browser_app_problem(cloud, origins, rules):
        raise fail(problem, 2)
    names = split_platforms(platform)
    if names == ["all"]:
        names = Registry.from_settings(get_settings()).available()
    stack: LocalStack | AwsStack
    if cloud == "aws":
        stack = AwsStack(names, http_port=start_search_port)
    elif cloud == "gcp":
        ports = {"start_search": start_search_port} if start_search_port else None
        app_env = devstack.browser_app_env(origins)
        stack = LocalStack(
            names, firestore_port=firestore_port, function_ports=ports, extra_env=app_env
        )
    else:
        raise fail(f"--cloud is gcp or aws, not {cloud!r}", 2)
    try:
        with stack:
            for component, address in stack.describe():
                out.print(f"{component:<14} {address}", highlight=False)
            if isinstance(stack, LocalStack):
                for component, address in devstack.prepare_browser_app(stack, origins, rules):
                    out.print(f"{component:<14} {address}", highlight=False)
            out.print(
                f"ready: fanfuse search --endpoint {stack.addresses.functions['start_search']}"
                ' --api-key <api_key above> "your query"   (Ctrl-C stops everything)',
                highlight=False,
            )
            while True:
                time.sleep(1)
    except KeyboardInterrupt:
        pass
    except RuntimeError as exc:
        raise fail(str(exc), 1) from None


@app.command()
def mcp(
    http: Annotated[bool, typer.Option("--http", help="streamable HTTP instead of stdio")] = False,
    host: Annotated[str, typer.Option(help="address to listen on (--http)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port (--http); 0: a free one, printed")] = 8765,
    endpoint: Annotated[
        str | None, typer.Option(help="start_search URL of a deployed stack (default: embedded)")
    ] = None,
    max_wait: Annotated[
        float | None, typer.Option(help="seconds `search` waits at most (default: the deadline)")
    ] = None,
    api_key: ApiKeyOption = None,
    auth: AuthOption = None,
    audience: AudienceOption = None,
    google_credentials: GoogleCredentialsOption = None,
    id_token_file: IdTokenFileOption = None,
    aws_region: AwsRegionOption = None,
    require_auth: Annotated[
        bool,
        typer.Option(
            "--require-auth",
            help="verify callers (X-Api-Key or Bearer ID token) on loopback too; any other "
            "--host always does",
        ),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            help="a Host name clients use to reach --http (repeatable); loopback's "
            "and --host's are served already"
        ),
    ] = None,
) -> None:
    """Serve the search as MCP tools for agents.

    Over stdio by default, or streamable HTTP."""
    from fanfuse.fronts.mcp.transports import ExposedRemote, McpOptions, log_to_stderr, serve

    log_to_stderr()
    credentials = client_auth(
        auth, api_key, audience, google_credentials, id_token_file, aws_region
    )
    try:
        sender = credentials.build(endpoint) if endpoint else None
    except FanfuseError as exc:
        raise fail(str(exc), 2) from None
    options = McpOptions(
        http=http,
        host=host,
        port=port,
        endpoint=endpoint,
        max_wait=max_wait,
        auth=sender,
        require_auth=require_auth,
        allowed_hosts=allowed_host or [],
    )
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C on the HTTP server: a clean stop
        try:
            asyncio.run(serve(options))
        except ExposedRemote as exc:
            raise fail(str(exc)) from None


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="0: a free port")] = 8000,
    public_url: Annotated[
        str | None, typer.Option(help="base of the links handed out, if not the bound address")
    ] = None,
    warm: Annotated[
        str | None,
        typer.Option(help="platforms to load at startup: a, b | none (default: docs, vectors)"),
    ] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn's log level")] = "warning",
    json_logs: Annotated[
        bool, typer.Option(help="fanfuse's log lines as Cloud Logging JSON on stderr")
    ] = False,
) -> None:
    """Serve the HTTP API and the search page from one process.

    One resident embedded runtime, until Ctrl-C or SIGTERM.

    Prints `url http://HOST:PORT`, `api_key ff_...` (a key for owner `local`, valid while it
    runs), then `ready` once it answers. The routes (those of the
    functions, plus /search, events, /platforms): GET /openapi.json, docs/serve.md.
    """
    from fanfuse.fronts.serve.server import run_server
    from fanfuse.wire.request import split_platforms

    names = None if warm is None else [n for n in split_platforms(warm) if n != "none"]
    if json_logs:
        from fanfuse.settings import get_settings
        from fanfuse.support.logs import install_json_logging

        install_json_logging(get_settings().project)
    try:
        run_server(host, port, public_url=public_url, warm=names, log_level=log_level)
    except FanfuseError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", 1) from None
    except RuntimeError as exc:
        raise fail(str(exc), 1) from None
    out.print("stopped", highlight=False)


@app.command()
def openapi() -> None:
    """Print the HTTP API's OpenAPI 3.1 document.

    `fanfuse openapi > docs/openapi.json` regenerates the checked-in copy."""
    from fanfuse.http.openapi import render

    sys.stdout.write(render())


def _register_groups() -> None:
    from fanfuse.cli.bench import bench_app
    from fanfuse.cli.config import config_command
    from fanfuse.cli.index import index
    from fanfuse.cli.keys import keys_app
    from fanfuse.cli.stats import stats_command
    from fanfuse.cli.trace import trace_command

    app.add_typer(bench_app, name="bench")
    app.add_typer(keys_app, name="keys")
    app.command("stats")(stats_command)
    app.command("index")(index)
    app.command("trace")(trace_command)
    app.command("config")(config_command)


_register_groups()

if __name__ == "__main__":
    app()
