"""A store backend's stalls as `StoreUnavailable` (503 with Retry-After), one wrapper for every
store: each public method of a store class is wrapped so that what its backend raises when it
stalls, is overloaded or stays contended (the backend's own `stalled` predicate says which)
becomes StoreUnavailable, while a deliberate FanfuseError (LeaseHeld, TaskNotFound...) stays
itself and anything else propagates unchanged. Firestore: firestore_calls.py; DynamoDB:
dynamodb.py. And `until_won`: the cloud stores' optimistic writes, tried again while they lose
races, then StoreUnavailable too."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)
from tenacity.stop import stop_base

from fanfuse.wire.errors import FanfuseError, StoreUnavailable

C = TypeVar("C", bound=type)
T = TypeVar("T")
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


def until_won(
    what: str,
    once: Callable[[], T],
    lost: type[BaseException] | tuple[type[BaseException], ...],
    *,
    attempts: int,
    multiplier: float,
    max_wait_s: float,
    retry_after_s: float,
    budget_s: float | None = None,
) -> T:
    """`once` (a read and a write conditioned on it) again while it raises `lost` (it lost a
    race), after a random wait that grows with the tries (jittered exponential backoff up to
    `max_wait_s`): instances that collided once would collide again in lock step. At most
    `attempts` tries (and `budget_s`); then StoreUnavailable with `retry_after_s`."""
    stop: stop_base = stop_after_attempt(attempts)
    if budget_s is not None:
        stop |= stop_after_delay(budget_s)
    retrying = Retrying(
        retry=retry_if_exception_type(lost),
        wait=wait_random_exponential(multiplier=multiplier, max=max_wait_s),
        stop=stop,
        reraise=True,
    )
    try:
        return retrying(once)
    except lost as exc:
        raise StoreUnavailable(f"{what} still contended; try again", retry_after_s) from exc
