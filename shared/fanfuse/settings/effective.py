"""The effective settings, each with where its value came from: what `fanfuse config` prints.

An operator whose deployment misbehaves asks which value a setting has here and who set it:
the default, the environment, the dotenv file (`FANFUSE_ENV_FILE`) or the code that built the
tree. Every field of the root and of its sections is listed, and a platform's on request, by
the variables that set it; a secret (a `SecretStr`, or a map entry whose key names one: an
extra platform's `api_key`) shows only whether it is set.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from fanfuse.settings import Settings
from fanfuse.settings.sources import Origin, env_names, origin, sections
from fanfuse.support.redact import is_secret_name

MASK = "**********"


class Effective(BaseModel):
    """One setting as this process has it."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="where it is in the tree: `ttl_minutes`, `content.timeout`")
    variables: list[str] = Field(description="the variables that set it, first one first")
    value: Any = Field(description="its value as JSON; a secret: masked, or null when unset")
    origin: Origin
    secret: bool = False


def masked(value: Any, secret: bool = False) -> Any:
    """`value` as JSON, secrets hidden: a SecretStr (or any value under a secret-named key)
    shows as MASK when set."""
    if isinstance(value, SecretStr) or (secret and value not in (None, "")):
        return MASK if value is not None and str(value) != "" else None
    if isinstance(value, BaseModel):
        return masked(value.model_dump())
    if isinstance(value, dict):
        return {str(k): masked(v, is_secret_name(str(k))) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [masked(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def fields(
    model: BaseModel, prefix: str, env_file: Path | None, path: str = ""
) -> Iterator[Effective]:
    """The settings of `model` read under `prefix`, then its sections', each under its own."""
    nested = dict(sections(type(model)))
    for name, info in type(model).model_fields.items():
        if name in nested:
            continue
        secret = "SecretStr" in str(info.annotation)
        yield Effective(
            name=f"{path}{name}",
            variables=env_names(prefix, name, info),
            value=masked(getattr(model, name), secret),
            origin=origin(prefix, name, info, name in model.model_fields_set, env_file),
            secret=secret,
        )
    for name, kind in nested.items():
        section = getattr(model, name)
        yield from fields(section, kind.env_prefix, env_file, f"{path}{name}.")


def effective(
    settings: Settings, platforms: dict[str, tuple[BaseModel, str]] | None = None
) -> list[Effective]:
    """Every setting of the tree, then each platform's of `platforms` (name -> its settings
    and their variables' prefix), named `platforms.<name>.<field>`."""
    prefix = str(settings.model_config.get("env_prefix", ""))
    rows = list(fields(settings, prefix, settings.env_file_read))
    for name, (model, own_prefix) in (platforms or {}).items():
        rows += fields(model, own_prefix, settings.env_file_read, f"platforms.{name}.")
    return rows
