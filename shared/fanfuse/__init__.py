"""fanfuse: one search request, many platforms, one fused answer.

The Python API (docs/python-api.md): `fanfuse.search(...)` runs one search synchronously;
`async with fanfuse.Runtime() as rt: await rt.search(...)` keeps models and indexes loaded across
searches. Both take a `SearchRequest`, its JSON body as a dict, or a query with keyword fields.

They are loaded on first use (PEP 562), so `import fanfuse.fronts.functions` in a Cloud Function
does not pay for the embedded runtime at cold start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Mode", "Runtime", "SearchRequest", "TaskView", "__version__", "search"]

if TYPE_CHECKING:
    from fanfuse.runtimes.embedded import EmbeddedRuntime as Runtime
    from fanfuse.runtimes.embedded import search
    from fanfuse.support.version import __version__
    from fanfuse.wire.models import TaskView
    from fanfuse.wire.modes import Mode
    from fanfuse.wire.request import SearchRequest

_LAZY = {
    "Runtime": ("fanfuse.runtimes.embedded", "EmbeddedRuntime"),
    "search": ("fanfuse.runtimes.embedded", "search"),
    "SearchRequest": ("fanfuse.wire.request", "SearchRequest"),
    "TaskView": ("fanfuse.wire.models", "TaskView"),
    "Mode": ("fanfuse.wire.modes", "Mode"),
    "__version__": ("fanfuse.support.version", "__version__"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'fanfuse' has no attribute {name!r}")
    import importlib

    module, attribute = _LAZY[name]
    return getattr(importlib.import_module(module), attribute)
