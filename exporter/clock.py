"""Clocks: the real one for daemons, and a virtual one the simulator steps tick by tick.

Each has a wall clock (``now``: where time is on the calendar, which NTP or a VM migration may step back or
forward) and a monotonic one (``monotonic``: seconds that only ever go forward at the rate time passes, from an
arbitrary origin). ``Timeline`` joins the two into the time the agent's books are kept in."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from exporter.logs import get_logger

log = get_logger("clock")


class Clock(Protocol):
    """Wall-clock seconds since the epoch, and a monotonic clock beside it."""

    def now(self) -> float:
        """Seconds since the epoch, as a float."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin that never go back (steps of the wall clock do not move it)."""
        ...


class RealClock:
    """``time.time()``."""

    def now(self) -> float:
        """The wall clock, ``time.time()``."""
        return time.time()

    def monotonic(self) -> float:
        """``time.monotonic()``: CLOCK_MONOTONIC, which NTP slews but never steps."""
        return time.monotonic()


class VirtualClock:
    """A clock that only moves when told to; the simulator drives it."""

    def __init__(self, start: float) -> None:
        self._now = start

    def now(self) -> float:
        """The time last set (or the start), unchanged between ``set`` calls."""
        return self._now

    def monotonic(self) -> float:
        """Virtual time never goes back: it is its own monotonic clock."""
        return self._now

    def set(self, t: float) -> None:
        """Move the clock to ``t``; ValueError if that is earlier, since ticks must not run backwards."""
        if t < self._now:
            raise ValueError("a virtual clock never goes backwards")
        self._now = t


#: A difference between the wall clock and the timeline that changes by more than this is a step, not drift.
STEP_THRESHOLD = 1.0


@dataclass(slots=True)
class ClockSteps:
    """Steps of the wall clock seen so far, by direction, and the wall clock's offset from the timeline now."""

    back: int = 0
    forward: int = 0
    offset: float = 0.0  # wall clock - timeline, seconds


class Timeline:
    """The agent's time: the wall clock read once at start (never earlier than where its state file left off),
    then advanced by the monotonic clock. It never goes back, and a step of the wall clock does not move it: the
    GPU-seconds between two ticks are the seconds that passed, and each lands in the hour the timeline puts it.
    A step is reported (``steps``, a ``clock_stepped`` log line). The timeline follows the wall clock again only at
    the next start (from the wall clock, or from the state file's last tick when that is later)."""

    def __init__(self, clock: Clock, *, not_before: float | None = None, name: str = "") -> None:
        self.clock = clock
        wall = clock.now()
        start = wall if not_before is None else max(wall, not_before)
        self._origin = start - clock.monotonic()
        self.steps = ClockSteps(offset=wall - start)
        self.name = name  # the node, in the log line

    def now(self) -> float:
        """Seconds since the epoch on the timeline; notes a step of the wall clock since the last call."""
        at = self._origin + self.clock.monotonic()
        offset = self.clock.now() - at
        moved = offset - self.steps.offset
        if abs(moved) > STEP_THRESHOLD:
            if moved < 0:
                self.steps.back += 1
            else:
                self.steps.forward += 1
            self.steps.offset = offset
            log.warning("clock_stepped", node=self.name, direction="back" if moved < 0 else "forward",
                        by_seconds=round(moved, 3), offset_seconds=round(offset, 3),
                        reason="the wall clock moved against the monotonic clock; the books keep the timeline")
        return at
