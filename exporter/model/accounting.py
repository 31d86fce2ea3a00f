"""The accounting arithmetic: charging an interval to a device's holders, and counter deltas.

Definitions (ARCHITECTURE.md): allocated = fraction x seconds; used = fraction x seconds x
utilisation, except on a time-sliced GPU where the device's busy seconds are split among its holders
in proportion to their fractions, capped at each holder's allocation; unmeasured = allocated while no
utilisation reading existed; idle = allocated - used - unmeasured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

EPSILON = 1e-9


@dataclass(slots=True)
class Usage:
    """Cumulative (or delta) GPU-seconds of one holder, plus energy."""

    allocated: float = 0.0
    used: float = 0.0
    unmeasured: float = 0.0
    energy_j: float = 0.0
    #: Of ``allocated``, seconds on a busy shared GPU whose busy time was split by fraction because no measured
    #: per-pod use was there (``agent/exporters/per_pod``): a count of how much of ``used`` is an estimate.
    split: float = 0.0

    @property
    def idle(self) -> float:
        """Allocated time that was measured and not used (never negative)."""
        return max(0.0, self.allocated - self.used - self.unmeasured)

    def add(self, other: Usage) -> None:
        """Add ``other``'s seconds and energy to these, in place."""
        self.allocated += other.allocated
        self.used += other.used
        self.unmeasured += other.unmeasured
        self.energy_j += other.energy_j
        self.split += other.split

    def as_tuple(self) -> tuple[float, float, float, float]:
        """(allocated, used, unmeasured, energy_j), in this order."""
        return (self.allocated, self.used, self.unmeasured, self.energy_j)


@dataclass(frozen=True, slots=True)
class Holding:
    """One holder's claim on a device: its fraction of the whole physical GPU."""

    key: str
    fraction: float


@dataclass(slots=True)
class Reading:
    """What DCGM said about a device at this tick; ``utilization`` None means no reading."""

    utilization: float | None
    energy_delta_j: float = 0.0


@dataclass(slots=True)
class Charge:
    """The result of charging one interval on one device."""

    per_holder: dict[str, Usage] = field(default_factory=dict)


def clamp_utilization(value: float | None) -> tuple[float | None, bool]:
    """Clamp a utilisation reading into [0, 1]; NaN/inf become None. Returns (value, was_bad)."""
    if value is None:
        return None, False
    if math.isnan(value) or math.isinf(value):
        return None, True
    if value < 0.0:
        return 0.0, True
    if value > 1.0:
        return 1.0, True
    return value, False


def charge_exclusive(fraction: float, seconds: float, *, reading: Reading) -> Usage:
    """Charge ``seconds`` to a holder that alone holds a device worth ``fraction`` of a GPU.

    Whole GPUs (fraction 1) and MIG instances (fraction = slices / GPU slices, with the instance's
    own utilisation) take this path.
    """
    allocated = fraction * seconds
    energy = reading.energy_delta_j
    if reading.utilization is None:
        return Usage(allocated=allocated, used=0.0, unmeasured=allocated, energy_j=energy)
    return Usage(allocated=allocated, used=allocated * reading.utilization, energy_j=energy)


def charge_shared(holdings: Sequence[Holding], seconds: float, *, reading: Reading) -> dict[str, Usage]:
    """Charge ``seconds`` on a time-sliced GPU to all of its current holders.

    The device's busy GPU-seconds (seconds x utilisation) are split in proportion to the holders'
    fractions, never giving a holder more than it was allocated. Energy is split by fraction.
    """
    total_fraction = sum(h.fraction for h in holdings)
    out: dict[str, Usage] = {}
    if total_fraction <= 0:
        return out
    busy = None if reading.utilization is None else seconds * reading.utilization
    for h in holdings:
        allocated = h.fraction * seconds
        energy = reading.energy_delta_j * h.fraction / max(total_fraction, 1.0)
        usage = out.setdefault(h.key, Usage())
        if busy is None:
            usage.add(Usage(allocated=allocated, unmeasured=allocated, energy_j=energy))
        else:
            used = min(allocated, busy * h.fraction / total_fraction)
            usage.add(Usage(allocated=allocated, used=used, energy_j=energy))
    return out


def counter_delta(previous: Usage | None, current: Usage, *, same_epoch: bool) -> tuple[Usage, bool]:
    """Turn two cumulative readings into what happened between them.

    A new epoch, or any field going backwards, is a reset: the counter restarted from zero, so the
    whole current value is new. Returns (delta, was_reset).
    """
    cur = current
    whole = Usage(allocated=cur.allocated, used=cur.used, unmeasured=cur.unmeasured, energy_j=cur.energy_j,
                  split=cur.split)
    if previous is None or not same_epoch:
        return whole, previous is not None
    prev = previous
    if (cur.allocated < prev.allocated - EPSILON or cur.used < prev.used - EPSILON
            or cur.unmeasured < prev.unmeasured - EPSILON or cur.split < prev.split - EPSILON):
        return whole, True
    energy = (cur.energy_j if cur.energy_j < prev.energy_j - EPSILON  # energy alone reset (driver reload)
              else max(0.0, cur.energy_j - prev.energy_j))
    return Usage(allocated=max(0.0, cur.allocated - prev.allocated), used=max(0.0, cur.used - prev.used),
                 unmeasured=max(0.0, cur.unmeasured - prev.unmeasured), energy_j=energy,
                 split=max(0.0, cur.split - prev.split)), False


def cost_of(gpu_seconds: float, hourly_price: float) -> float:
    """Money for ``gpu_seconds`` whole-GPU-equivalent seconds at ``hourly_price`` per GPU-hour."""
    return gpu_seconds / 3600.0 * hourly_price
