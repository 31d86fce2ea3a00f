"""Async plumbing shared by both daemons: jittered backoff and signal-driven shutdown."""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import datetime
from typing import Any


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


def start_ticking(tick: Callable[[], Awaitable[None]], interval: float,
                  *, others: Sequence[tuple[Callable[[], Awaitable[Any]], float]] = ()) -> Any:
    """Start an APScheduler AsyncIOScheduler: ``tick`` every ``interval`` seconds from now, plus ``others``
    (coroutine, seconds). Runs never overlap and missed runs coalesce into one."""
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    scheduler = AsyncIOScheduler()
    scheduler.add_job(tick, "interval", seconds=interval, max_instances=1, coalesce=True,
                      next_run_time=datetime.now(), misfire_grace_time=None, id="tick")
    for i, (job, every) in enumerate(others):
        scheduler.add_job(job, "interval", seconds=every, max_instances=1, coalesce=True, id=f"job-{i}")
    scheduler.start()
    return scheduler
