"""A node's GPU energy per tick, from DCGM's total-energy counter (classic mJ or 4.9 joules names).

Each physical GPU's counter is read once per tick (GPU-wide: its MIG instances repeat it, never summed).
A delta counts only between two consecutive ticks that both read the GPU. A GPU without the field, a
DCGM scrape that failed, or a delta the board could not have drawn (above ``MAX_GPU_WATTS`` x the
interval, the bound booking holds agents to: a mJ counter read as joules, a broken exporter) leaves that
interval *unmeasured*: its GPU-seconds are counted, never priced, never guessed; and the next delta starts
from a fresh reading, so the energy of a gap is never charged to whoever holds the GPU when DCGM answers
again.

Where the energy goes (the meter decides what was held): holders' shares, then the rest of each GPU's
delta to ``unallocated`` (nobody held it, or held only part of it) under the GPU's model; the part of a
delta beyond the charge cap, and whole deltas while holders were unknown, to ``unobserved``. So per
tick, with every GPU measured: Σ holders' energy + unallocated + unobserved = Σ counter deltas.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.model.plausibility import MAX_GPU_WATTS

UNKNOWN_MODEL = "unknown"
#: Tick jitter allowed on top of the interval when bounding a delta.
SLACK_SECONDS = 1.0


def energy_bound(seconds: float, gpus: float = 1.0) -> float:
    """The most energy ``gpus`` boards can draw in ``seconds`` (joules), with the jitter slack."""
    return gpus * MAX_GPU_WATTS * (max(0.0, seconds) + SLACK_SECONDS)


def read_deltas(last: dict[str, float], dcgm: Mapping[tuple[str, str], DcgmDevice] | None, *,
                elapsed: float | None) -> dict[str, float]:
    """Joules each GPU drew since the previous tick (``elapsed`` seconds ago; None: no previous tick).

    ``last`` becomes this tick's readings: a GPU not read now has no mark, so its next delta is unknown,
    not a catch-up over the gap. A counter that went back (driver reload) counts from zero."""
    current: dict[str, float] = {}
    for dev in (dcgm or {}).values():
        if dev.energy is not None and dev.gpu_uuid not in current:
            current[dev.gpu_uuid] = dev.energy
    deltas: dict[str, float] = {}
    if elapsed is not None:
        for uuid, value in current.items():
            prev = last.get(uuid)
            if prev is None:
                continue
            delta = value - prev if value >= prev else value
            if 0.0 <= delta <= energy_bound(elapsed):
                deltas[uuid] = delta
    last.clear()
    last.update(current)
    return deltas


@dataclass(slots=True)
class TickEnergy:
    """One tick's energy over the window the meter charges: each GPU's delta, and what its holders were
    charged of it so far (the rest is unallocated)."""

    deltas: Mapping[str, float]  # GPU uuid -> joules
    charged: dict[str, float] = field(default_factory=lambda: defaultdict(float))


@dataclass(slots=True)
class NodeEnergy:
    """Cumulative energy of a node's capacity charged to no holder, and the GPU-seconds nobody measured."""

    unallocated: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # model -> joules
    unobserved: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # model -> joules
    unmeasured_s: float = 0.0

    def count_unmeasured(self, *, gpus: float, deltas: Mapping[str, float], inventory: Mapping[str, str],
                         seconds: float) -> None:
        """The node's GPUs without a delta this tick, for the tick's ``seconds``."""
        measured = sum(1 for uuid in deltas if uuid in inventory)
        self.unmeasured_s += max(0.0, gpus - measured) * max(0.0, seconds)

    def to_unobserved(self, deltas: Mapping[str, float], *, share: float, inventory: Mapping[str, str]) -> None:
        """``share`` of each delta: time whose holders nobody observed."""
        if share <= 0:
            return
        for uuid, joules in deltas.items():
            self.unobserved[inventory.get(uuid, UNKNOWN_MODEL)] += joules * share

    def charged_part(self, deltas: Mapping[str, float], *, charged_s: float, elapsed: float,
                     inventory: Mapping[str, str]) -> dict[str, float]:
        """The part of each delta over the ``charged_s`` seconds the meter charges; the part beyond the
        charge cap is the unobserved time's, like its GPU-seconds (a stalled agent must not bill it to
        whoever holds the GPU now)."""
        if elapsed <= 0:
            return dict(deltas)
        self.to_unobserved(deltas, share=1.0 - charged_s / elapsed, inventory=inventory)
        return {uuid: joules * charged_s / elapsed for uuid, joules in deltas.items()}

    def to_unallocated(self, tick: TickEnergy, *, inventory: Mapping[str, str]) -> None:
        """What holders were not charged of each GPU's delta (never below zero: an oversubscribed GPU's
        holders may together be charged more than it drew, as they pay for more time than it had)."""
        for uuid, joules in tick.deltas.items():
            self.unallocated[inventory.get(uuid, UNKNOWN_MODEL)] += max(0.0, joules - tick.charged.get(uuid, 0.0))
