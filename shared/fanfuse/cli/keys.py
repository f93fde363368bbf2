"""`fanfuse keys create | list | revoke`: the API keys of the public endpoints.

The keys live in the store the runtime uses, so the command and the server agree with no other
configuration:

- DynamoDB, the Lambdas' store (FANFUSE_DYNAMODB_TABLE, FANFUSE_AWS_REGION, and
  FANFUSE_AWS_ENDPOINT_URL for moto), with `--dynamodb`, or by default when FANFUSE_CLOUD is
  `aws`, as the functions choose it (`fanfuse.runtimes.aws`); credentials from boto3's chain;
- Firestore, the functions' store (FANFUSE_PROJECT, FANFUSE_COLLECTION), with `--firestore`, or
  by default when FIRESTORE_EMULATOR_HOST is set (the emulator `fanfuse dev` prints);
- else the embedded runtime's SQLite file (FANFUSE_DB_PATH), the one `fanfuse serve` reads.

The credential options of the commands that call an endpoint (`search`, `mcp`) are here too, with
the key's: `client_auth` builds their `ClientAuth` (`fanfuse.auth.outbound`) at the CLI root.

`create` prints the key once, alone on stdout (`export FANFUSE_API_KEY=$(fanfuse keys create
--owner me)`), and what it stored on stderr; nothing else ever shows a key, or its hash.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from fanfuse.auth import keys
from fanfuse.cli.search_view import console, fail, out
from fanfuse.settings import get_settings
from fanfuse.settings.client import AuthName
from fanfuse.store.ports import TaskStore
from fanfuse.wire.cost import usd
from fanfuse.wire.errors import FanfuseError
from fanfuse.wire.models import ApiKey, utcnow

if TYPE_CHECKING:
    from fanfuse.auth.outbound import ClientAuth


def explained(exc: FanfuseError, endpoint: str | None) -> str:
    """The error line of a command that called `endpoint`: a 401 also says how to give a key
    (the server's message names the HTTP header, which a command-line user does not set)."""
    if endpoint and exc.status_code == 401:
        return (
            f"{exc}; give a key with --api-key KEY or FANFUSE_API_KEY=KEY (`fanfuse serve` and "
            "`fanfuse dev` print one on their `api_key` line; `fanfuse keys create` makes one)"
        )
    return str(exc)


keys_app = typer.Typer(
    no_args_is_help=True,
    help="API keys of the public endpoints: create, list, revoke.",
    rich_markup_mode=None,
)

ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        show_default=False,
        help="API key sent as X-Api-Key to --endpoint (`fanfuse keys create`, `fanfuse dev`) "
        "[default: FANFUSE_API_KEY]",
    ),
]
"""`--api-key` of the commands that call an endpoint (`search`, `mcp`)."""
ID_TOKEN_ENV = "FANFUSE_ID_TOKEN"
"""A Firebase ID token for --endpoint: read from the environment only (a command line is seen by
every user of the machine in `ps`)."""

AuthOption = Annotated[
    AuthName | None,
    typer.Option(
        "--auth",
        show_default=False,
        help="how to authenticate to --endpoint; by default what is given decides: a "
        "Firebase token: firebase; an execute-api host: sigv4; --audience or "
        "--google-credentials: google-id-token; --api-key: api-key. An API key given is "
        "sent with any mode [default: FANFUSE_AUTH]",
    ),
]
AudienceOption = Annotated[
    str | None,
    typer.Option(
        help="google-id-token: the token's audience (default: FANFUSE_AUDIENCE, else the "
        "called service's URL)",
    ),
]
GoogleCredentialsOption = Annotated[
    Path | None,
    typer.Option(
        help="google-id-token: a service-account key file (default: Application Default "
        "Credentials: GOOGLE_APPLICATION_CREDENTIALS, or the metadata server)",
    ),
]
IdTokenFileOption = Annotated[
    Path | None,
    typer.Option(
        help=f"firebase: a file holding the Firebase ID token, read on every call (default: "
        f"FANFUSE_ID_TOKEN_FILE; or the token itself in {ID_TOKEN_ENV})",
    ),
]
AwsRegionOption = Annotated[
    str | None,
    typer.Option(help="sigv4: the API's region (default: the endpoint's, else AWS_REGION)"),
]


def client_auth(
    auth: AuthName | None,
    api_key: str | None,
    audience: str | None,
    google_credentials: Path | None,
    id_token_file: Path | None,
    aws_region: str | None,
) -> ClientAuth:
    """The credential settings of a command that calls --endpoint, from its options and, for
    any left out, the settings tree's `client` section (`FANFUSE_API_KEY`, ...): built here, at
    the root, and passed down."""
    from pydantic import SecretStr

    from fanfuse.auth.outbound import AuthMode, ClientAuth

    client = get_settings().client
    auth = auth or client.auth
    token = client.id_token.get_secret_value().strip() if client.id_token else ""
    return ClientAuth(
        mode=AuthMode(auth) if auth else None,
        api_key=SecretStr(api_key) if api_key else client.api_key,
        audience=audience or client.audience,
        google_credentials=google_credentials,
        id_token=SecretStr(token) if token else None,
        id_token_file=id_token_file or client.id_token_file,
        aws_region=aws_region,
    )


StoreOption = Annotated[
    bool | None,
    typer.Option(
        "--firestore/--sqlite",
        show_default=False,
        help="the store (default: DynamoDB when FANFUSE_CLOUD=aws, Firestore when "
        "FIRESTORE_EMULATOR_HOST is set, else SQLite)",
    ),
]
DynamoOption = Annotated[
    bool,
    typer.Option(
        "--dynamodb",
        help="the Lambdas' DynamoDB table (FANFUSE_DYNAMODB_TABLE, FANFUSE_AWS_REGION)",
    ),
]
StoreKind = Literal["sqlite", "firestore", "dynamodb"]


def which_store(firestore: bool | None, dynamodb: bool, cloud: str, emulator: bool) -> StoreKind:
    """The store a command works on: the one named, else the one the runtime of this
    environment uses (the Lambdas' on FANFUSE_CLOUD=aws, the emulator's, else SQLite's)."""
    if dynamodb:
        if firestore is not None:
            raise fail("give one store: --dynamodb, --firestore or --sqlite")
        return "dynamodb"
    if firestore is not None:
        return "firestore" if firestore else "sqlite"
    if cloud == "aws":
        return "dynamodb"
    return "firestore" if emulator else "sqlite"


@contextmanager
def opened(firestore: bool | None, dynamodb: bool = False) -> Iterator[tuple[TaskStore, str]]:
    """The store (and where it is, to say so), closed on exit."""
    settings = get_settings()
    store: TaskStore
    emulator = bool(settings.firestore_emulator_host)
    kind = which_store(firestore, dynamodb, settings.cloud, emulator)
    if kind == "dynamodb":
        from fanfuse.runtimes.aws import dynamo_store

        store = dynamo_store(settings)
        at = f" at {settings.aws_endpoint_url}" if settings.aws_endpoint_url else ""
        where = f"DynamoDB {settings.aws_region}/{settings.dynamodb_table}{at}"
    elif kind == "firestore":
        from fanfuse.store.firestore import KEYS_SUFFIX, store_from_settings

        store = store_from_settings(settings)
        where = f"Firestore {settings.project}/{settings.collection}{KEYS_SUFFIX}"
    else:
        from fanfuse.store.sqlite import SqliteStore

        store, where = SqliteStore(settings.db_path), f"SQLite {settings.db_path}"
    try:
        yield store, where
    finally:
        store.close()


@keys_app.command()
def create(
    owner: Annotated[str, typer.Option(help="whose searches the key starts (their owner)")],
    label: Annotated[str, typer.Option(help="a note for `keys list`")] = "",
    rate_per_minute: Annotated[
        int | None, typer.Option(min=1, help="starts per minute (default: the deployment's)")
    ] = None,
    max_in_flight: Annotated[
        int | None, typer.Option(min=1, help="unfinished searches (default: the deployment's)")
    ] = None,
    daily_budget_usd: Annotated[
        float | None,
        typer.Option(min=0, help="USD of provider calls a UTC day at most (default: no daily cap)"),
    ] = None,
    firestore: StoreOption = None,
    dynamodb: DynamoOption = False,
) -> None:
    """Create a key and print it, once: only its hash is stored."""
    if not owner.strip():
        raise fail("--owner must not be empty")
    if daily_budget_usd is not None and not math.isfinite(daily_budget_usd):
        raise fail("--daily-budget-usd must be a finite number of dollars")
    plaintext, record = keys.new_key(
        owner, label, rate_per_minute, max_in_flight, utcnow(), daily_budget_usd=daily_budget_usd
    )
    with opened(firestore, dynamodb) as (store, where):
        store.put_key(record)
    sys.stdout.write(plaintext + "\n")
    console.print(
        f"key {record.key_id} for {owner} stored in {where}; the key above is shown only now",
        highlight=False,
        soft_wrap=True,
    )


def _when(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%MZ")


def _limit(value: int | None) -> str:
    return "default" if value is None else str(value)


def _usd(value: float | None) -> str:
    return "none" if value is None else usd(value)


def public(record: ApiKey) -> dict[str, Any]:
    """What `list` shows of a key: everything but its hash."""
    return record.model_dump(mode="json", exclude={"secret_sha256"})


@keys_app.command("list")
def list_keys(
    as_json: Annotated[bool, typer.Option("--json")] = False,
    firestore: StoreOption = None,
    dynamodb: DynamoOption = False,
) -> None:
    """List the keys, revoked ones too (id, owner, label, limits, dates; never a secret)."""
    with opened(firestore, dynamodb) as (store, _):
        records = store.list_keys()
    if as_json:
        sys.stdout.write(json.dumps([public(r) for r in records], indent=2) + "\n")
        return
    # One line per key, not a table: a table squeezes the id at 80 columns, and the id is what
    # `revoke` needs whole.
    for r in records:
        line = (
            f"{r.key_id}  owner {r.owner}  label {r.label or '-'}  "
            f"per min {_limit(r.rate_per_minute)}  in flight {_limit(r.max_in_flight)}  "
            f"daily budget {_usd(r.daily_budget_usd)}  "
            f"created {_when(r.created_at)}"
        )
        sys.stdout.write(line + (f"  revoked {_when(r.revoked_at)}" if r.revoked_at else "") + "\n")


@keys_app.command()
def revoke(
    key_id: Annotated[
        str,
        typer.Argument(help="the key's id, as `fanfuse keys list` shows it, or the whole key"),
    ],
    firestore: StoreOption = None,
    dynamodb: DynamoOption = False,
) -> None:
    """Revoke a key: refused (403) from then on (by a running server once its key cache ends)."""
    whole = keys.parse_key(key_id)
    if whole is not None:  # the key itself, as `create` printed it: its id is inside
        key_id = whole[0]
    if not keys.KEY_ID.match(key_id):
        # Never echo the argument: it may be a whole key, garbled in the pasting.
        raise fail(
            "not a key id nor a key: give the 16 hex characters `fanfuse keys list` shows, "
            "or the whole ff_... key"
        )
    with opened(firestore, dynamodb) as (store, where):
        record = store.get_key(key_id)
        if record is None:
            raise fail(f"no key {key_id} in {where}")
        if record.revoked_at is not None:
            out.print(f"key {key_id} was already revoked at {_when(record.revoked_at)}")
            return
        store.put_key(keys.revoked(record, utcnow()))
    from fanfuse.auth.callers import KEY_CACHE_SECONDS

    out.print(
        f"revoked key {key_id} of {record.owner}; running servers refuse it within "
        f"{KEY_CACHE_SECONDS:g} s",
        highlight=False,
    )
