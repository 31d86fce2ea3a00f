"""The cycle collector paused for a tick: off inside, back after (also after a failure), overlapping pauses
ending together, a collector the host turned off left off; the aggregator's tick books with it paused."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.aggregator.service import Aggregator
from exporter.config import AggregatorSettings
from exporter.runtime import collector_paused, cyclic_gc_paused
from exporter.sim.runner import free_port


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


async def test_paused_inside_and_back_after_even_when_the_tick_fails() -> None:
    seen: list[bool] = []

    @collector_paused
    async def tick(fail: bool) -> None:
        seen.append(gc.isenabled())
        if fail:
            raise RuntimeError("ledger down")

    await tick(False)
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        await tick(True)
    assert seen == [False, False] and gc.isenabled()


async def test_overlapping_pauses_end_when_the_last_ends() -> None:
    """A node's tick (started on a pod deletion) beside the full one: the first to end leaves the collector off
    for the other; it comes back when both are done."""
    first_done = asyncio.Event()
    during: list[bool] = []

    @collector_paused
    async def short() -> None:
        await asyncio.sleep(0)

    @collector_paused
    async def long() -> None:
        await first_done.wait()
        during.append(gc.isenabled())

    task = asyncio.create_task(long())
    await asyncio.sleep(0)
    await short()
    first_done.set()
    await task
    assert during == [False] and gc.isenabled()


def test_a_collector_the_host_turned_off_stays_off() -> None:
    gc.disable()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


async def test_the_aggregator_books_with_the_collector_paused(tmp_path: Path) -> None:
    """A real tick (no agents) through ``Aggregator.tick``: ``prepare`` runs with the collector off, and after
    the tick it is on again."""
    agg = Aggregator(AggregatorSettings(listen=f"127.0.0.1:{free_port()}", ledger=tmp_path / "l.db", agents=[]))
    await agg.start(serve_http=False)
    assert agg.books is not None
    books, seen = agg.books, []
    prepare = books.prepare

    def watched(*args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return prepare(*args, **kwargs)  # type: ignore[arg-type]

    books.prepare = watched  # type: ignore[method-assign,assignment]
    try:
        await agg.tick()
    finally:
        await agg.close()
    assert seen == [False] and gc.isenabled()
