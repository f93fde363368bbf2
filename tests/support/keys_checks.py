"""`fanfuse keys create | list | revoke` on one store, the same checks on SQLite, Firestore
(the emulator) and DynamoDB (moto): the command picks the store as the runtime of that
environment does, and the key it prints is one that store's authenticator (the functions', the
Lambdas', `serve`'s) takes for its owner, until it is revoked."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import click
import pytest
from typer.testing import CliRunner, Result

from fanfuse.auth import keys
from fanfuse.auth.callers import Authenticator
from fanfuse.cli.main import app
from fanfuse.settings import Settings
from fanfuse.store.ports import TaskStore
from fanfuse.wire.errors import Forbidden


def keys_round_trip(
    env: Mapping[str, str | None],
    flags: list[str],
    where: str,
    store: Callable[[], TaskStore],
    accepted: Callable[[str], bool] | None = None,
) -> None:
    """Create, list and revoke a key through the CLI with `env` and `flags`; `where` is how the
    command names the store; `store()` opens that store as the runtime does; `accepted(key)`,
    when given, asks a running front whether it takes the key."""
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        result = runner.invoke(app, ["keys", *args, *flags], env=dict(env))
        assert result.exit_code == 0, result.output
        return result

    created = invoke(
        "create",
        *("--owner", "carol", "--label", "everywhere", "--max-in-flight=3"),
        "--daily-budget-usd=2.5",
    )
    plaintext = created.stdout.strip()
    parsed = keys.parse_key(plaintext)
    assert parsed is not None and created.stdout == plaintext + "\n"
    key_id, secret = parsed
    told = click.unstyle(created.stderr)
    assert f"key {key_id} for carol stored in {where}" in told, told

    listed = json.loads(invoke("list", "--json").stdout)
    mine = [k for k in listed if k["key_id"] == key_id]
    assert len(mine) == 1 and mine[0]["owner"] == "carol" and mine[0]["max_in_flight"] == 3
    assert mine[0]["daily_budget_usd"] == 2.5
    shown = invoke("list").stdout
    assert key_id in shown and secret not in shown and keys.digest(secret) not in shown
    assert "daily budget $2.5" in shown

    opened = store()
    try:
        caller = Authenticator(Settings(), opened).caller({keys.API_KEY_HEADER: plaintext})
        assert caller is not None and caller.subject.endswith("carol") and caller.max_in_flight == 3
        assert caller.daily_budget_usd == 2.5  # the budget start_search holds the key to
        if accepted is not None:
            assert accepted(plaintext)
        revoked = invoke("revoke", key_id)
        assert f"revoked key {key_id} of carol" in revoked.stdout
        with pytest.raises(Forbidden):  # a process with no cached record refuses it at once
            Authenticator(Settings(), opened).caller({keys.API_KEY_HEADER: plaintext})
        record = opened.get_key(key_id)
        assert record is not None and record.revoked_at is not None
    finally:
        opened.close()
    assert "already revoked" in invoke("revoke", key_id).stdout
