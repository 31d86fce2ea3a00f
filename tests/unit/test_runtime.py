"""The cycle collector paused for a tick: off inside, back after (also after a failure), overlapping pauses
ending together whichever ends first, a collector the host turned off left off; the aggregator's tick books
with it paused and does not pause it while it waits for the lock; long-lived objects frozen once per process."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from exporter import runtime
from exporter.aggregator.service import Aggregator
from exporter.config import AggregatorSettings
from exporter.runtime import cyclic_gc_paused, freeze_long_lived
from exporter.sim.runner import free_port


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_paused_inside_and_back_after_even_when_the_block_fails() -> None:
    seen: list[bool] = []
    with cyclic_gc_paused():
        seen.append(gc.isenabled())
    assert gc.isenabled()
    with pytest.raises(RuntimeError), cyclic_gc_paused():
        seen.append(gc.isenabled())
        raise RuntimeError("ledger down")
    assert seen == [False, False] and gc.isenabled()


@pytest.mark.parametrize("first_to_end", ["first_started", "last_started"])
async def test_overlapping_pauses_end_when_the_last_ends(first_to_end: str) -> None:
    """A node's tick (started on a pod deletion) beside the full one: whichever ends first leaves the collector
    off for the other; it comes back when both are done."""
    release = {"first_started": asyncio.Event(), "last_started": asyncio.Event()}
    during: list[bool] = []

    async def paused(name: str) -> None:
        with cyclic_gc_paused():
            await release[name].wait()
            during.append(gc.isenabled())

    tasks = [asyncio.create_task(paused("first_started"))]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(paused("last_started")))
    await asyncio.sleep(0)
    other = "last_started" if first_to_end == "first_started" else "first_started"
    release[first_to_end].set()
    await asyncio.sleep(0.01)
    assert during == [False] and not gc.isenabled()  # one ended, the other still holds the pause
    release[other].set()
    await asyncio.gather(*tasks)
    assert during == [False, False] and gc.isenabled()


def test_a_collector_the_host_turned_off_stays_off() -> None:
    gc.disable()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


async def test_the_aggregator_books_with_the_collector_paused_and_not_while_it_waits(tmp_path: Path) -> None:
    """A real tick (no agents) through ``Aggregator.tick``: ``prepare`` runs with the collector off; a tick
    queued behind the lock (another tick running) leaves it on meanwhile; after the tick it is on again."""
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
        async with agg._lock:
            queued = asyncio.create_task(agg.tick())
            await asyncio.sleep(0.01)
            assert gc.isenabled() and not queued.done()
        await queued
    finally:
        await agg.close()
    assert seen == [False] and gc.isenabled()


def test_long_lived_objects_are_frozen_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first call freezes what is alive; a second (another aggregator started in the same process) freezes
    nothing more, so that aggregator's garbage stays collectable."""
    monkeypatch.setattr(runtime, "_COLLECTOR", runtime._Collector())
    before = gc.get_freeze_count()
    try:
        freeze_long_lived()
        frozen = gc.get_freeze_count()
        assert frozen > before
        later = [[i] for i in range(1000)]  # new objects, alive at the second call
        freeze_long_lived()
        assert gc.get_freeze_count() == frozen and len(later) == 1000
    finally:
        gc.unfreeze()


async def test_cancel_all_waits_for_the_tasks_and_names_one_that_swallows_its_cancel() -> None:
    """A task that ends on its cancel and one that had failed are done; one that catches its cancel and runs on
    is named after the grace instead of holding the caller for ever."""
    async def obedient() -> None:
        await asyncio.sleep(3600)

    async def failed() -> None:
        raise RuntimeError("already logged")

    released = asyncio.Event()

    async def stubborn() -> None:
        while not released.is_set():
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue

    tasks = [asyncio.ensure_future(obedient()), asyncio.ensure_future(failed()), asyncio.ensure_future(stubborn())]
    tasks[2].set_name("stubborn")
    await asyncio.sleep(0)
    with capture_logs() as logs:
        assert await runtime.cancel_all(tasks, grace=0.2) == ["stubborn"]
    assert [(e["event"], e["task"], e["log_level"]) for e in logs] == [("task_did_not_stop", "stubborn", "error")]
    assert tasks[0].cancelled() and isinstance(tasks[1].exception(), RuntimeError) and not tasks[2].done()
    released.set()
    assert await runtime.cancel_all(tasks[2:], grace=2.0) == [] and tasks[2].done()
    assert await runtime.cancel_all([], grace=0.2) == []
