"""A store backend's stalls as `StoreUnavailable` (503 with Retry-After), one wrapper for every
store: each public method of a store class is wrapped so that what its backend raises when it
stalls, is overloaded or stays contended (the backend's own `stalled` predicate says which)
becomes StoreUnavailable, while a deliberate FanfuseError (LeaseHeld, TaskNotFound...) stays
itself and anything else propagates unchanged. Firestore: firestore_calls.py; DynamoDB:
dynamodb.py."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from fanfuse.errors import FanfuseError, StoreUnavailable

C = TypeVar("C", bound=type)
Stalled = Callable[[BaseException], bool]


def surfacing(
    backend: str, stalled: Stalled, retry_after_s: Callable[[Any], float]
) -> Callable[[C], C]:
    """A class decorator; `retry_after_s(store)`: the Retry-After a stall answers with."""

    def decorate(cls: C) -> C:
        for name, method in list(vars(cls).items()):
            if not name.startswith("_") and inspect.isfunction(method):
                setattr(cls, name, _surfacing(method, backend, stalled, retry_after_s))
        return cls

    return decorate


def _surfacing(
    method: Callable[..., Any],
    backend: str,
    stalled: Stalled,
    retry_after_s: Callable[[Any], float],
) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except FanfuseError:
            raise  # a deliberate answer (LeaseHeld, TaskNotFound...) stays itself
        except Exception as exc:
            if not stalled(exc):
                raise
            message = f"{backend} did not answer {method.__name__} in time ({exc}); try again"
            raise StoreUnavailable(message, retry_after_s(self)) from exc

    return call
