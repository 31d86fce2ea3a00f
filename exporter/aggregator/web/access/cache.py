"""A short-lived cache of reviews with one request in flight per key: 200 scrapes arriving together with one
token cost one TokenReview, not 200. Failures are not cached (the next request asks again)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, NamedTuple, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Entry(NamedTuple, Generic[V]):
    """A cached value and when it was computed (monotonic seconds)."""

    at: float
    value: V


class TtlCache(Generic[K, V]):
    """``get(key, compute)``: the value computed less than ``ttl`` seconds ago, else ``compute()``'s, shared by
    every caller waiting on the same key meanwhile."""

    def __init__(self, ttl: float, *, max_entries: int = 10_000,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._now = now
        self._values: dict[K, _Entry[V]] = {}
        self._pending: dict[K, asyncio.Future[V]] = {}

    async def get(self, key: K, compute: Callable[[], Awaitable[V]]) -> V:
        """The cached value of ``key``, or the one being computed, or a fresh one."""
        hit = self._values.get(key)
        if hit is not None and self._now() - hit.at < self.ttl:
            return hit.value
        pending = self._pending.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            value = await compute()
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a failure nobody else waited for is not reported as lost
            raise
        else:
            future.set_result(value)
            self._store(key, value)
            return value
        finally:
            del self._pending[key]

    def _store(self, key: K, value: V) -> None:
        now = self._now()
        if len(self._values) >= self.max_entries:  # drop what expired; if still full, the oldest entries
            self._values = {k: v for k, v in self._values.items() if now - v.at < self.ttl}
            while len(self._values) >= self.max_entries:
                del self._values[next(iter(self._values))]
        self._values[key] = _Entry(now, value)
