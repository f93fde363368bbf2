"""`fanfuse config`: the settings this process reads, and where each value came from.

The view an operator needs when a deployment misbehaves: every setting of the tree (the root's,
then its sections'), its value here, whether the default, the environment, the dotenv file
(`FANFUSE_ENV_FILE`) or code set it, and the variable that sets it; `--platform NAME` adds that
platform's settings. Secrets show only whether they are set. `--json` prints the same rows.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from pydantic import BaseModel, ValidationError
from rich.table import Column

from fanfuse.cli.search_view import compact_table, fail, out


def _shown(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value)


def config_command(
    platform: Annotated[
        list[str] | None,
        typer.Option("--platform", help="also this platform's settings (repeatable)"),
    ] = None,
    only_set: Annotated[
        bool, typer.Option("--set", help="only the settings not at their default")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Print the effective settings: value, where it came from, the variable that sets it.

    Origins: default, environment, file (the dotenv file FANFUSE_ENV_FILE names), code. Secrets
    are masked."""
    from fanfuse.platforms import Registry
    from fanfuse.settings import get_settings
    from fanfuse.settings.effective import effective

    settings = get_settings()
    registry = Registry.from_settings(settings)
    platforms: dict[str, tuple[BaseModel, str]] = {}
    for name in platform or []:
        if name not in registry.names():
            raise fail(f"--platform: unknown platform {name!r}")
        chosen = registry.get(name)
        try:
            platforms[name] = (chosen.settings(), chosen.env_prefix)
        except ValidationError as exc:
            raise fail(f"--platform {name}: {chosen.availability() or exc}", 1) from exc
    rows = effective(settings, platforms)
    if only_set:
        rows = [row for row in rows if row.origin != "default"]
    if as_json:
        data = [row.model_dump(mode="json") for row in rows]
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    read = settings.env_file_read
    title = f"settings (file: {read})" if read else "settings"
    table = compact_table(
        Column("variable", no_wrap=True),
        Column("origin", no_wrap=True),
        Column("value", overflow="fold"),
        title=title,
    )
    for row in rows:  # the variable says the setting (`--json` has its name in the tree too)
        table.add_row(row.variables[0], row.origin.value, _shown(row.value))
    out.print(table, highlight=False, markup=False)
