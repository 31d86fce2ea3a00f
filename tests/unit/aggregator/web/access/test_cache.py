"""The review cache: one computation in flight per key, values kept ``ttl`` seconds, failures never kept;
and the Scope routes filter rows by."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from exporter.aggregator.web.access.cache import TtlCache
from exporter.aggregator.web.access.reviews import ReviewUnavailable
from exporter.aggregator.web.access.scope import EVERYTHING, Scope


class _Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


async def test_concurrent_callers_share_one_computation() -> None:
    calls = 0
    release = asyncio.Event()

    async def compute() -> str:
        nonlocal calls
        calls += 1
        await release.wait()
        return "alice"

    cache: TtlCache[str, str] = TtlCache(10.0)
    waiting = [asyncio.ensure_future(cache.get("k", compute)) for _ in range(50)]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*waiting) == ["alice"] * 50
    assert calls == 1


async def test_values_expire_after_the_ttl() -> None:
    clock, calls = _Clock(), []

    async def compute() -> int:
        calls.append(clock.t)
        return len(calls)

    cache: TtlCache[str, int] = TtlCache(10.0, now=clock)
    assert await cache.get("k", compute) == 1
    clock.t = 9.9
    assert await cache.get("k", compute) == 1
    clock.t = 10.0
    assert await cache.get("k", compute) == 2


async def test_a_failure_is_not_kept() -> None:
    """The API server was down: every waiter gets the failure, and the next request asks again."""
    outcomes: list[str | Exception] = [ReviewUnavailable("down"), "alice"]

    async def compute() -> str:
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    cache: TtlCache[str, str] = TtlCache(10.0)
    with pytest.raises(ReviewUnavailable):
        await cache.get("k", compute)
    assert await cache.get("k", compute) == "alice"


async def test_a_full_cache_drops_the_oldest() -> None:
    """Bounded whatever the number of tokens seen: the oldest entry is computed again, the newest is not."""
    computed: list[int] = []
    cache: TtlCache[int, int] = TtlCache(10.0, max_entries=3)

    def compute(i: int) -> Callable[[], Awaitable[int]]:
        async def run() -> int:
            computed.append(i)
            return i
        return run
    for i in range(5):
        await cache.get(i, compute(i))
    await cache.get(4, compute(4))
    await cache.get(0, compute(0))
    assert computed == [0, 1, 2, 3, 4, 0]


def test_scope_rows_and_groupings() -> None:
    team = Scope(namespaces=frozenset({"a"}))
    rows = [{"namespace": "a"}, {"namespace": "b"}, {"namespace": "__unallocated__"}]
    assert team.rows(rows) == [{"namespace": "a"}]
    assert EVERYTHING.rows(rows) == rows
    assert team.may_group("pod") and team.may_group("cluster,namespace") and team.may_group("claim")
    assert not team.may_group("node") and not team.may_group("pool") and not team.may_group("model")
    assert EVERYTHING.may_group("node")
