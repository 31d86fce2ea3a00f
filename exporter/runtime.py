"""Async plumbing shared by both daemons: jittered backoff and signal-driven shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import signal
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from exporter.logs import get_logger

T = TypeVar("T")
log = get_logger("runtime")


def backoff_delays(base: float = 0.5, cap: float = 30.0) -> Iterator[float]:
    """Full-jitter exponential backoff: 0..base, 0..2*base, ... capped at ``cap``."""
    attempt = 0
    while True:
        yield random.uniform(0, min(cap, base * (2**attempt)))  # jitter, not cryptography
        attempt = min(attempt + 1, 30)


def install_stop_signals(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT set ``stop``; the daemon then flushes and exits."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not in the main thread
            pass


def split_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets allowed) as (host, port); an empty host listens on all interfaces."""
    host, _, port = listen.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


TASK_STOP_GRACE = 10.0  # seconds a daemon's cancelled task may take to end at shutdown


async def cancel_all(tasks: Sequence[asyncio.Task[Any]], *, grace: float) -> list[str]:
    """Cancel ``tasks`` and wait at most ``grace`` seconds for them to end; the names of those still running. A task
    that swallows its cancel (a library, or ``wait_for`` on 3.11) must not keep a daemon from stopping for ever:
    each is logged (``task_did_not_stop``) and named."""
    for task in tasks:
        task.cancel()
    if not tasks:
        return []
    done, stuck = await asyncio.wait(tasks, timeout=grace)
    for task in done:  # their failures were logged where they happened: retrieved here, not raised
        if not task.cancelled():
            task.exception()
    names = sorted(task.get_name() for task in stuck)
    for name in names:
        log.error("task_did_not_stop", task=name, grace_s=grace)
    return names


async def finish(task: asyncio.Future[T], *, cancelled: bool = False) -> T:
    """``task``'s result, waiting for its end even when the caller is cancelled meanwhile (or already was:
    ``cancelled``, a cancel it caught), then re-raising the cancel. For work that cannot be called back once started
    (a commit on the ledger's thread): the caller must know, and apply, its outcome before it stops."""
    interrupted = cancelled
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            interrupted = True  # even when the task ended at the same moment: the cancel is not lost
        except Exception:  # the task's own failure: raised below, by ``task.result()``
            pass
    if interrupted:  # the cancel, not the task's failure, is what the caller asked for: the failure is logged
        if not task.cancelled() and task.exception() is not None:
            log.error("work_failed_while_cancelled", error=repr(task.exception())[:300])
        raise asyncio.CancelledError
    return task.result()


def start_ticking(tick: Callable[[], Awaitable[None]], interval: float,
                  *, others: Sequence[tuple[Callable[[], Awaitable[Any]], float]] = ()) -> Ticking:
    """``tick`` every ``interval`` seconds from now on the monotonic clock (``Ticking``), plus ``others``
    (coroutine, seconds) on an APScheduler AsyncIOScheduler. Runs never overlap and missed runs coalesce into one."""
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    scheduler = AsyncIOScheduler()
    for i, (job, every) in enumerate(others):
        scheduler.add_job(job, "interval", seconds=every, max_instances=1, coalesce=True, id=f"job-{i}")
    scheduler.start()
    return Ticking(asyncio.create_task(_every(tick, interval), name="tick"), scheduler)


@dataclass(slots=True)
class Ticking:
    """The tick loop and the scheduler of the other jobs; ``shutdown`` cancels both (and a tick running now)."""

    task: asyncio.Task[None]
    scheduler: Any

    def shutdown(self, wait: bool = False) -> None:
        """Stop ticking: the running tick is cancelled, as APScheduler's shutdown cancels its job."""
        self.task.cancel()
        self.scheduler.shutdown(wait=wait)


async def _every(tick: Callable[[], Awaitable[None]], interval: float) -> None:
    """Ticks at ``interval`` on the event loop's clock, which is monotonic: a step of the wall clock neither stalls
    the ticks (an APScheduler interval trigger waits for wall time to catch up after a step back) nor bunches
    them. A tick longer than the interval is followed at once by the next."""
    loop = asyncio.get_running_loop()
    due = loop.time()
    while True:
        try:
            await tick()
        except Exception as exc:  # a tick that failed is retried at the next one, as the scheduler's jobs are
            log.error("tick_failed", error=repr(exc))
        due = max(due + interval, loop.time())
        await asyncio.sleep(due - loop.time())


@dataclass(slots=True)
class _Collector:
    """What this process did to the cycle collector: one per process, as the collector is."""

    pauses: int = 0  # pauses open now
    was_enabled: bool = False  # whether it was on when the first of them began
    frozen: bool = False  # ``freeze_long_lived`` has run


_COLLECTOR = _Collector()


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cycle collector for one block (a tick): booking builds ~10^5 objects that live until the
    commit, and the collector re-scanning them, and the books' long-lived marks, every 700 allocations cost
    about a third of a large tick. Reference counting still frees everything acyclic at once; cycles made in
    the block wait for the first collection after it. Pauses nest and overlap: the collector comes back when
    the last ends, if it was on when the first began."""
    c = _COLLECTOR
    if c.pauses == 0:
        c.was_enabled = gc.isenabled()
        gc.disable()
    c.pauses += 1
    try:
        yield
    finally:
        c.pauses -= 1
        if c.pauses == 0 and c.was_enabled:
            gc.enable()


def freeze_long_lived() -> None:
    """Once per process, as a daemon starts: move every object alive now (modules, clients, the books restored
    from the ledger) out of the collector's generations. They live as long as the process, and scanning them
    on each full collection is work that can never free anything. Only once: a frozen object that later
    becomes cyclic garbage is never collected, so freezing again (a second aggregator in one process) would
    keep the first one's garbage for good."""
    if _COLLECTOR.frozen:
        return
    _COLLECTOR.frozen = True
    gc.collect()
    gc.freeze()
