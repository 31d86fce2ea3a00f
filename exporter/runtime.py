"""Async plumbing shared by both daemons: jittered backoff and signal-driven shutdown."""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import Iterator


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
    host, _, port = listen.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)
