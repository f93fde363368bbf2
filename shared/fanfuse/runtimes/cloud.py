"""The cloud runtime's per-process wiring: the ports it runs on, its singletons, its event loops.

One SearchService per process, on Firestore and Cloud Tasks, or on DynamoDB and SQS when
FANFUSE_CLOUD is `aws` (`fanfuse.runtimes.aws`), with the platform registry, built on the first
request so a cold start imports only what its target uses; the settings, read once; the
authenticator on the service's store; and a persistent event loop per request thread for
`run_platform` (see `_Loops`). The fronts that serve it (`fanfuse.fronts.functions` for Cloud
Functions, `fanfuse.fronts.aws_lambda` for Lambda) hold no state of their own.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from fanfuse.auth.callers import Authenticator

if TYPE_CHECKING:
    from fanfuse.service.service import SearchService
    from fanfuse.settings import Settings

T = TypeVar("T")


_service: SearchService | None = None
_settings: Settings | None = None
_authenticator: Authenticator | None = None
_service_lock = threading.Lock()
_settings_lock = threading.Lock()  # not _service_lock: building the service reads the settings


def settings() -> Settings:
    """This process's settings tree (`get_settings`, read once): a task target checks its
    delivery with them before it builds the service."""
    global _settings
    with _settings_lock:
        if _settings is None:
            from fanfuse.settings import get_settings

            _settings = get_settings()
        return _settings


def build_service() -> SearchService:
    """The service on Firestore and Cloud Tasks, or on DynamoDB and SQS when FANFUSE_CLOUD is
    `aws` (the Lambda handlers, `fanfuse.fronts.aws_lambda`), configured from `FANFUSE_*`
    settings."""
    from fanfuse.platforms import Registry
    from fanfuse.service.service import SearchService

    config = settings()
    if config.cloud == "aws":
        from fanfuse.runtimes.aws import aws_ports

        store, queue = aws_ports(config)
    else:
        from fanfuse.queue.cloud_tasks import CloudTasksQueue
        from fanfuse.store.firestore import store_from_settings

        store, queue = store_from_settings(config), CloudTasksQueue(config)
    registry = Registry.from_settings(config)  # each platform's settings: read on first use, kept
    return SearchService(
        store,
        queue,
        registry,
        config,
        content=config.content,
        rerank=config.rerank_llm,
        finalize_at_fan_in=True,  # one queue hop less (SearchService, lifecycle)
    )


def service() -> SearchService:
    """This process's service, built on first use (so a cold start pays only for its target)."""
    global _service
    with _service_lock:
        if _service is None:
            _service = build_service()
        return _service


def authenticator() -> Authenticator:
    """This process's authenticator, on the service's store and settings (and its key cache)."""
    global _authenticator
    svc = service()
    with _service_lock:
        if _authenticator is None or _authenticator.store is not svc.store:
            _authenticator = Authenticator(svc.settings, svc.store)
        return _authenticator


class _Loops:
    """A persistent event loop per request thread, for the async `run_platform`.

    Per thread, so that concurrent deliveries (one per platform queue) do not queue up behind
    each other's blocking Firestore calls on one shared loop; persistent, so the shared HTTP
    runner keeps its connection pool (one per loop) across requests, and never closed, because
    closing a loop (as `asyncio.run` does) waits for its worker threads, and one stuck in a
    platform that ignored its timeout would then hold the HTTP answer forever.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        loop: asyncio.AbstractEventLoop | None = getattr(self._local, "loop", None)
        if loop is None:
            loop = self._local.loop = asyncio.new_event_loop()
        return loop.run_until_complete(coro)


loops = _Loops()
