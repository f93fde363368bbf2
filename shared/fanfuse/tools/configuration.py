"""docs/configuration.md, generated from the settings models: every variable, its default, what
it does. `python -m fanfuse.tools.configuration > docs/configuration.md` writes it; a test
checks that the page is what the models say.

The page reads the pydantic models, never a list kept by hand: a field added to a model is on
the page at the next generation, with its description (`Field(description=...)`, else the
docstring under the field). The sections are the root `Settings`, the content stages', the LLM
reranker's, what every platform shares, and each platform's own fields. A model with nested
models is walked the same way: a nested section's variables are named with the model's
`env_nested_delimiter` (`X_INNER__TIMEOUT`), or, without one, the section is one JSON variable;
the root's sections (settings/sources.py) have a section of the page each, under their own
prefix.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import itertools
import json
import os
import re
import textwrap
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

from fanfuse.settings.sources import env_names

HEADER = """# Configuration: every setting

Generated from the settings models by `python -m fanfuse.tools.configuration >
docs/configuration.md` (a test fails when this page and the models differ): do not edit by hand.
Every setting is an environment variable, or a line of the dotenv file `FANFUSE_ENV_FILE` names
(the environment wins); a list, a map or a nested section is JSON. Each composition root (the
functions, the Lambdas, `fanfuse serve`, the command) reads them once at its start: `fanfuse
config` prints what it read and where each value came from. A platform is available exactly
when its settings validate (`fanfuse platforms` says which variable is missing). Defaults are
shown for a machine whose home folder is `~`.

What a process reads here, each value with its origin (`default`, `environment`, `file`, `code`)
and secrets masked; `--json` for a script, `--platform NAME` for a platform's settings too:

```bash
fanfuse config --set
fanfuse config --platform docs --json
```
"""


def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """The docstring under each field of `model` and of its bases (the nearest wins)."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        with contextlib.suppress(OSError, TypeError, SyntaxError):
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
            body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
            for node, after in itertools.pairwise(body):
                if (
                    isinstance(node, ast.AnnAssign)
                    and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                ):
                    docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation).replace("typing.", "")
    for long, short in (("pathlib.", ""), ("pydantic.types.", "")):
        text = text.replace(long, short)
    text = re.sub(r"\bfanfuse(\.\w+)*\.(?=[A-Z])", "", text)  # a model by its class name
    return text.replace("NoneType", "None")


def shown(value: Any) -> str:
    """A default as a reader types it: JSON for lists and maps, `~` for the home folder."""
    if value is None or value is PydanticUndefined:
        return "" if value is None else "required"
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, dict | list | tuple):
        text = json.dumps(value, default=str)
    else:
        text = str(value)
    home = str(Path.home())
    return f"`{text.replace(home, '~')}`" if text else '`""`'


def default_of(info: FieldInfo) -> str:
    if info.default_factory is not None:
        with _clean_environment():
            return shown(info.default_factory())  # type: ignore[call-arg]
    return shown(info.default)


@contextlib.contextmanager
def _clean_environment() -> Iterator[None]:
    """Defaults computed as on a machine with no FANFUSE_ variable set."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("FANFUSE_")}
    for key in saved:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.update(saved)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def rows(
    model: type[BaseModel], prefix: str, skip: frozenset[str] = frozenset()
) -> Iterator[tuple[str, str, str, str]]:
    """(variables, type, default, meaning) per field of `model`, nested sections walked."""
    docs = field_docs(model)
    delimiter = None
    if issubclass(model, BaseSettings):
        delimiter = model.model_config.get("env_nested_delimiter")
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        nested = info.annotation
        if isinstance(nested, type) and issubclass(nested, BaseModel) and delimiter:
            yield from rows(nested, f"{prefix}{name}{delimiter}".upper())
            continue
        meaning = info.description or docs.get(name, "")
        names = ", ".join(f"`{n}`" for n in env_names(prefix, name, info))
        yield names, type_name(info.annotation), default_of(info), meaning


def table(model: type[BaseModel], prefix: str, skip: frozenset[str] = frozenset()) -> str:
    lines = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    for names, kind, default, meaning in rows(model, prefix, skip):
        lines.append(f"| {names} | `{_cell(kind)}` | {_cell(default)} | {_cell(meaning)} |")
    return "\n".join(lines)


def sections() -> Iterator[tuple[str, str, str]]:
    """(title, introduction, table) per section of the page."""
    from fanfuse.platforms import BUILTIN, load_engine
    from fanfuse.platforms.contract import PlatformSettings
    from fanfuse.platforms.http_api import HttpSettings
    from fanfuse.settings import Settings
    from fanfuse.settings.client import ClientSettings
    from fanfuse.settings.content import ContentSettings
    from fanfuse.settings.rerank import LlmRerankSettings
    from fanfuse.settings.sources import sections as section_fields

    yield (
        "The deployment (`Settings`)",
        "Where tasks live and for how long, the cloud's ports, who may call, quotas, caps and "
        "prices.",
        table(
            Settings,
            str(Settings.model_config.get("env_prefix", "")),
            frozenset(name for name, _ in section_fields(Settings)),
        ),
    )
    yield (
        "Page content (`Settings.content`, `FANFUSE_CONTENT_*`)",
        "Fetching, extracting and compressing result pages (`include_content`).",
        table(ContentSettings, ContentSettings.env_prefix),
    )
    yield (
        "The LLM reranker (`Settings.rerank_llm`, `FANFUSE_RERANK_LLM_*`)",
        "An OpenAI-compatible endpoint that reranks `comprehensive` searches (docs/modes.md).",
        table(LlmRerankSettings, LlmRerankSettings.env_prefix),
    )
    yield (
        "The command's credentials (`Settings.client`)",
        "What `fanfuse search` and `fanfuse mcp --endpoint` send to the endpoint when their "
        "options (`--api-key`, `--auth`, ...) say nothing.",
        table(ClientSettings, ClientSettings.env_prefix),
    )
    shared = frozenset(HttpSettings.model_fields)
    yield (
        "Every platform (`FANFUSE_<PLATFORM>_*`)",
        "Each platform reads these under its own name (`FANFUSE_BRAVE_TIMEOUT`): the first "
        f"{len(PlatformSettings.model_fields)} rows every platform, the rest the HTTP ones. A "
        "platform's own default, where it differs, is in its section below.",
        table(HttpSettings, "FANFUSE_<PLATFORM>_"),
    )
    for engine in BUILTIN:
        platform = load_engine(engine)
        model = platform.settings_model
        own = frozenset(
            name
            for name in shared & frozenset(model.model_fields)
            if _same_default(model, HttpSettings, name)
        )
        body = table(model, platform.env_prefix, own)
        if body.count("\n") < 2:
            body = "Nothing beyond the shared settings."
        about = f"{platform.description}; its options: [platforms.md](platforms.md)."
        yield f"`{engine}`", about[0].upper() + about[1:], body


def _same_default(model: type[BaseModel], base: type[BaseModel], name: str) -> bool:
    mine, theirs = model.model_fields[name], base.model_fields.get(name)
    return theirs is not None and default_of(mine) == default_of(theirs)


def render() -> str:
    parts = [HEADER]
    for title, introduction, body in sections():
        parts.append(f"## {title}\n\n{introduction}\n\n{body}\n")
    return "\n".join(parts)


if __name__ == "__main__":
    import sys

    sys.stdout.write(render())
