"""The platform registry: names to modules, imported only when a platform is used.

A Cloud Function worker for one platform imports that platform's module and no other.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from fanfuse.platforms.contract import Platform
from fanfuse.settings import Settings
from fanfuse.wire.instances import ExtraPlatform
from fanfuse.wire.models import PlatformHealth, PlatformInfo

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


def load_engine(
    engine: str,
    name: str | None = None,
    overrides: dict[str, Any] | None = None,
    root: Settings | None = None,
) -> Platform[Any]:
    """A platform of built-in `engine`, named `name` (default: the engine's), importing only it,
    its settings read through `root` (None: the process's settings tree)."""
    module, _, attr = BUILTIN[engine].partition(":")
    cls: type[Platform[Any]] = getattr(importlib.import_module(module), attr)
    return cls(name=name, overrides=overrides, root=root)


class Registry:
    """The platforms a deployment knows, and which of them can run here.

    Besides the built-in engines, named instances of an engine with their own settings
    (`FANFUSE_EXTRA_PLATFORMS`, e.g.
    `{"team_searx": {"engine": "searxng", "settings": {"base_url": "http://searx.internal"}}}`),
    and, where platforms run elsewhere (start_search holds no provider keys), the list of
    deployed ones, which are then the available ones. Built from the `Settings` it is given
    (`from_settings`), never from the environment behind them.
    """

    def __init__(
        self,
        engines: Mapping[str, str] | None = None,
        extra: Mapping[str, ExtraPlatform] | None = None,
        deployed: list[str] | None = None,
        *,
        instances: Iterable[Platform[Any]] = (),
        root: Settings | None = None,
    ) -> None:
        """`engines` (name -> engine, default: every built-in under its own name), `extra`
        named instances, `deployed` (None: availability decided by each platform's settings),
        ready-made `instances` (tests, embedders), and the settings tree the platforms' settings
        are read through (`root`; None: the process's)."""
        self._root = root
        self._engines: dict[str, str] = (
            {name: name for name in BUILTIN} if engines is None else dict(engines)
        )
        self._extra: dict[str, ExtraPlatform] = dict(extra or {})
        self._loaded: dict[str, Platform[Any]] = {p.name: p for p in instances}
        self._deployed = deployed
        for name, spec in self._extra.items():
            if spec.engine not in BUILTIN:
                raise ValueError(f"extra platform {name!r}: unknown engine {spec.engine!r}")
            self._engines[name] = spec.engine

    @classmethod
    def from_settings(cls, settings: Settings) -> Registry:
        """The deployment's registry: the built-ins, the local corpora `fanfuse index`
        registered under the cache folder (platforms/corpora.py), plus what `settings` add."""
        from fanfuse.platforms.corpora import local_platforms

        extra = {**local_platforms(settings.cache_dir), **settings.extra_platforms}
        return cls(extra=extra, deployed=settings.deployed_platforms, root=settings)

    @classmethod
    def of(cls, platforms: Iterable[Platform[Any]]) -> Registry:
        """Exactly these platforms (tests, embedders with platforms of their own)."""
        return cls({}, instances=platforms)

    def names(self) -> list[str]:
        return list(dict.fromkeys([*self._engines, *self._loaded]))

    def get(self, name: str) -> Platform[Any]:
        if name not in self._loaded:
            extra = self._extra.get(name)
            settings = extra.settings if extra is not None else None
            self._loaded[name] = load_engine(self._engines[name], name, settings, self._root)
        return self._loaded[name]

    def unavailable_reason(self, name: str) -> str | None:
        if self._deployed is not None:
            return None if name in self._deployed else "not deployed"
        try:
            return self.get(name).availability()
        except ImportError as exc:
            return f"not installed ({exc.name or exc})"

    def available(self) -> list[str]:
        return [n for n in self.names() if self.unavailable_reason(n) is None]

    def describe(
        self,
        healths: Mapping[str, PlatformHealth] | None = None,
        chains: Mapping[str, list[str]] | None = None,
    ) -> list[PlatformInfo]:
        """Every platform, whether it is available here, and why not (`fanfuse platforms`),
        with its health (breaker and latency) when the caller read the store's, its pace, and
        the deployment's fallback chain for it (`chains`)."""
        reasons = {name: self.unavailable_reason(name) for name in self.names()}
        healths, chains = healths or {}, chains or {}
        rows = []
        for n, r in reasons.items():
            limit, source = self._concurrency(n)
            rows.append(
                PlatformInfo(
                    name=n,
                    available=r is None,
                    reason=r,
                    health=healths.get(n),
                    max_concurrency=limit,
                    rate_limit=source,
                    pace_per_second=self.pace_of(n),
                    fallbacks=list(chains.get(n, ())),
                )
            )
        return rows

    def pace_of(self, name: str) -> float | None:
        """The platform's pace here (`Platform.pace_per_second`), on its settings when they can
        be read; None for an engine that is not installed."""
        try:
            platform = self.get(name)
        except ImportError:
            return None
        try:
            settings = platform.settings()
        except ValidationError:
            settings = None
        return platform.pace_per_second(settings)

    def _concurrency(self, name: str) -> tuple[int | None, str | None]:
        """The platform's calls in flight per process as this deployment sets them (its
        settings; their default when they are incomplete), and the limit that default comes
        from; nothing for a local platform or one whose engine is not installed."""
        try:
            platform = self.get(name)
        except ImportError:
            return None, None
        if platform.rate_limit is None:
            return None, None
        try:
            value: int | None = platform.settings().max_concurrency
        except ValidationError:
            default = platform.settings_model.model_fields["max_concurrency"].default
            value = default if isinstance(default, int) else None
        return value, platform.rate_limit.source
