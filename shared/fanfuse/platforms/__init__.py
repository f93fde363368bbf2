"""The platform registry: names to modules, imported only when a platform is used.

A Cloud Function worker for one platform imports that platform's module and no other.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping

from fanfuse.platforms.base import Platform
from fanfuse.settings import ExtraPlatform, Settings

# name -> "module:Class"; order is the order of `all`.
BUILTIN: dict[str, str] = {
    "docs": "fanfuse.platforms.docs:DocsPlatform",
    "vectors": "fanfuse.platforms.vectors:VectorsPlatform",
    "searxng": "fanfuse.platforms.searxng:SearxngPlatform",
    "google": "fanfuse.platforms.google:GooglePlatform",
    "perplexity": "fanfuse.platforms.perplexity:PerplexityPlatform",
    "tavily": "fanfuse.platforms.tavily:TavilyPlatform",
    "brave": "fanfuse.platforms.brave:BravePlatform",
    "linkup": "fanfuse.platforms.linkup:LinkupPlatform",
    "exa": "fanfuse.platforms.exa:ExaPlatform",
    "sec_edgar": "fanfuse.platforms.sec_edgar:SecEdgarPlatform",
    "arxiv": "fanfuse.platforms.arxiv:ArxivPlatform",
    "wikipedia": "fanfuse.platforms.wikipedia:WikipediaPlatform",
    "weixin": "fanfuse.platforms.weixin:WeixinPlatform",
    "builtin": "fanfuse.platforms.builtin:BuiltinPlatform",
    "web_search_mcp": "fanfuse.platforms.web_search_mcp:WebSearchMcpPlatform",
}


class Registry:
    """The platforms a deployment knows, and which of them can run here.

    Besides the built-in platforms, `FANFUSE_EXTRA_PLATFORMS` (JSON) adds named instances of a
    built-in engine with their own settings, e.g.
    `{"team_searx": {"engine": "searxng", "settings": {"base_url": "http://searx.internal"}}}`.
    """

    def __init__(
        self,
        specs: Mapping[str, str | Platform] | None = None,
        extra: Mapping[str, ExtraPlatform] | None = None,
        deployed: list[str] | None = None,
    ) -> None:
        """`specs=None` is the deployment's registry: the built-ins plus what settings add."""
        self._specs: dict[str, str | Platform] = dict(BUILTIN if specs is None else specs)
        self._loaded: dict[str, Platform] = {}
        self._extra: dict[str, ExtraPlatform] = {}
        if specs is None:
            settings = Settings()
            extra = settings.extra_platforms if extra is None else extra
            deployed = settings.deployed_platforms if deployed is None else deployed
        self._deployed = deployed
        for name, spec in (extra or {}).items():
            engine = BUILTIN.get(spec.engine)
            if engine is None:
                raise ValueError(f"extra platform {name!r}: unknown engine {spec.engine!r}")
            self._specs[name] = engine
            self._extra[name] = spec

    @classmethod
    def of(cls, platforms: Iterable[Platform]) -> Registry:
        return cls({p.name: p for p in platforms})

    def names(self) -> list[str]:
        return list(self._specs)

    def get(self, name: str) -> Platform:
        if name not in self._loaded:
            spec = self._specs[name]
            if isinstance(spec, Platform):
                self._loaded[name] = spec
            else:
                module, _, attr = spec.partition(":")
                cls = getattr(importlib.import_module(module), attr)
                extra = self._extra.get(name)
                self._loaded[name] = (
                    cls(name=name, overrides=extra.settings) if extra is not None else cls()
                )
        return self._loaded[name]

    def unavailable_reason(self, name: str) -> str | None:
        if self._deployed is not None:
            return None if name in self._deployed else "not deployed"
        try:
            return self.get(name).availability()
        except ImportError as exc:
            return f"not installed ({exc.name or exc})"

    def available(self) -> list[str]:
        return [n for n in self._specs if self.unavailable_reason(n) is None]
