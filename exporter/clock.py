"""Clocks: the real one for daemons, and a virtual one the simulator steps tick by tick."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall-clock seconds since the epoch."""

    def now(self) -> float:
        """Seconds since the epoch, as a float."""
        ...


class RealClock:
    """``time.time()``."""

    def now(self) -> float:
        """The wall clock, ``time.time()``."""
        return time.time()


class VirtualClock:
    """A clock that only moves when told to; the simulator drives it."""

    def __init__(self, start: float) -> None:
        self._now = start

    def now(self) -> float:
        """The time last set (or the start), unchanged between ``set`` calls."""
        return self._now

    def set(self, t: float) -> None:
        """Move the clock to ``t``; ValueError if that is earlier, since ticks must not run backwards."""
        if t < self._now:
            raise ValueError("a virtual clock never goes backwards")
        self._now = t
