"""Where the settings tree reads its values, and where each value came from.

The tree reads three sources, in this order of precedence: values given in code (a test's, a
front's), the process environment, then a dotenv file (`FANFUSE_ENV_FILE`); a field none of
them sets keeps its default. pydantic-settings reads the root's flat fields; this module reads
what it cannot name by itself with the variable names the deployment has always used:

- a section (`Settings.content`: `FANFUSE_CONTENT_<FIELD>`; `Settings.rerank_llm`:
  `FANFUSE_RERANK_LLM_<FIELD>`; `Settings.client`: `FANFUSE_<FIELD>`), a plain model whose
  `env_prefix` class variable names its variables, filled by `SectionsSource`;
- a platform's settings (`FANFUSE_<ENGINE>_<FIELD>`), a plain model whose prefix the platform
  derives from its engine, read on demand by `Settings.platform` (`section_values`).

Both are parsed by pydantic-settings' own environment source (JSON for a list, a map or a
model), over the environment and the file, so a section's variable reads exactly as a root
variable does. `origin` answers `fanfuse config`'s question (which source set a value), by the
same names.

This package is the one place that reads the process environment (tests/unit/test_layers.py
fails on a read anywhere else): `variables()` is the snapshot for what reads its own variables
(OpenTelemetry's `OTEL_*`, and the secret-named variables whose values support/redact.py masks:
`redact.watch`, set here on import), `update()` the one write (the Lambda front's scratch
folders).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from dotenv import dotenv_values
from pydantic import AliasChoices, BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource
from pydantic_settings.sources import DotEnvSettingsSource, EnvSettingsSource

from fanfuse.support import redact

if TYPE_CHECKING:
    from collections.abc import Iterator


class Section(BaseModel):
    """A group of settings read under a prefix of its own (`FANFUSE_CONTENT_`), nested in the
    root. Not a settings root: only the root reads sources (`SectionsSource`)."""

    env_prefix: ClassVar[str] = "FANFUSE_"


class Origin(StrEnum):
    """Where a setting's value came from (`fanfuse config`)."""

    DEFAULT = "default"
    ENVIRONMENT = "environment"
    FILE = "file"
    CODE = "code"


def variables() -> dict[str, str]:
    """The process environment, as it is now."""
    return dict(os.environ)


def variable(name: str) -> str | None:
    """One variable of the process environment (unset or empty: None)."""
    return os.environ.get(name) or None


def update(changes: Mapping[str, str]) -> None:
    """Set variables of the process environment, for the libraries that read their own."""
    os.environ.update(changes)


redact.watch(variables)  # the values of secret-named variables are masked wherever they appear


def default_cache_dir() -> Path:
    """`FANFUSE_CACHE_DIR`, else `~/.cache/fanfuse`: the default of `Settings.cache_dir`."""
    return Path(variable("FANFUSE_CACHE_DIR") or Path.home() / ".cache" / "fanfuse").expanduser()


def env_names(prefix: str, name: str, info: FieldInfo) -> list[str]:
    """The variables that set a field: its alias choices, else the prefix and its name; a
    section's, its own fields' (`FANFUSE_CONTENT_TIMEOUT`, ...)."""
    kind = info.annotation
    if isinstance(kind, type) and issubclass(kind, Section):
        return [n for f, i in kind.model_fields.items() for n in env_names(kind.env_prefix, f, i)]
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        return [c for c in alias.choices if isinstance(c, str)]
    if isinstance(alias, str):
        return [alias]
    return [f"{prefix}{name}".upper()]


def file_values(env_file: Path | None) -> dict[str, str]:
    """The variables a dotenv file sets (none without a file)."""
    if env_file is None or not env_file.is_file():
        return {}
    return {k.upper(): v for k, v in dotenv_values(env_file).items() if v is not None}


def origin(prefix: str, name: str, info: FieldInfo, given: bool, env_file: Path | None) -> Origin:
    """Which source set the field `name` (read under `prefix`); `given`: the field is set,
    by some source (pydantic's `model_fields_set`)."""
    names = env_names(prefix, name, info)
    environ = {k.upper() for k in os.environ}
    if any(n.upper() in environ for n in names):
        return Origin.ENVIRONMENT
    if any(n.upper() in file_values(env_file) for n in names):
        return Origin.FILE
    return Origin.CODE if given else Origin.DEFAULT


class _ModelEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source over a plain model: a section's or a platform's
    fields, read and parsed as the root's are."""

    def __init__(self, model: type[BaseModel], prefix: str) -> None:
        super().__init__(cast("type[BaseSettings]", model), case_sensitive=False, env_prefix=prefix)


class _ModelFileSource(DotEnvSettingsSource):
    def __init__(self, model: type[BaseModel], prefix: str, env_file: Path | None) -> None:
        super().__init__(
            cast("type[BaseSettings]", model),
            env_file=env_file,
            case_sensitive=False,
            env_prefix=prefix,
        )


def section_values(model: type[BaseModel], prefix: str, env_file: Path | None) -> dict[str, Any]:
    """What the environment and the file set for `model`'s fields under `prefix` (the
    environment wins), for the model to validate."""
    found: dict[str, Any] = {}
    if env_file is not None:
        found.update(_ModelFileSource(model, prefix, env_file)())
    found.update(_ModelEnvSource(model, prefix)())
    return {k: v for k, v in found.items() if k in model.model_fields}


def sections(model: type[BaseModel]) -> Iterator[tuple[str, type[Section]]]:
    """The root's section fields: (name, model)."""
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, Section):
            yield name, kind


class SectionsSource(PydanticBaseSettingsSource):
    """The root's sections, each read under its own prefix from the environment and from the
    root's dotenv file."""

    def __init__(self, settings_cls: type[BaseSettings], env_file: Path | None) -> None:
        super().__init__(settings_cls)
        self.env_file = env_file

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads every section at once

    def __call__(self) -> dict[str, Any]:
        return {
            name: section_values(model, model.env_prefix, self.env_file)
            for name, model in sections(self.settings_cls)
        }
