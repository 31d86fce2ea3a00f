"""The "apply" step: cumulative, monotonic GPU-second counters per (namespace, pod, container, device).

Each tick charges the interval since the previous tick to what this tick observed, with the real
elapsed time, capped (a stalled agent must not bill an hour to whoever holds a GPU now); the cut-off
time is counted, not hidden. Counters survive restarts through ``state`` (same epoch), or restart
from zero with a new epoch so the aggregator can tell a reset from a decrease.
"""

from __future__ import annotations

import uuid as uuidlib
from collections import defaultdict
from dataclasses import dataclass, field

from exporter.agent.attribution import Assignment, Attribution, MigLocation
from exporter.agent.dcgm_devices import DcgmDevice
from exporter.model.accounting import Holding, Reading, Usage, charge_exclusive, charge_shared, clamp_utilization
from exporter.model.devices import DeviceKind
from exporter.model.usage import GpuCapacity, HolderCounters, UnallocatedCounter, UsageSnapshot

UNKNOWN_MODEL = "unknown"


@dataclass(slots=True)
class HolderState:
    """One holder's counters and what we last knew of its device."""

    namespace: str
    pod: str
    container: str
    device_id: str
    gpu_uuid: str
    model: str | None
    mig_profile: str | None
    fraction: float
    usage: Usage = field(default_factory=Usage)
    active: bool = True
    last_active: float = 0.0
    utilization: float | None = None


@dataclass(slots=True)
class TickStats:
    """What one tick did, for the agent's own metrics."""

    charged_seconds: float = 0.0
    capped_seconds: float = 0.0
    bad_readings: int = 0
    unresolved: int = 0
    unmeasured_devices: int = 0


def new_epoch() -> str:
    return uuidlib.uuid4().hex[:16]


@dataclass(slots=True)
class Meter:
    """All counters of one node."""

    node: str
    epoch: str = field(default_factory=new_epoch)
    seq: int = 0
    last_tick: float | None = None
    holders: dict[str, HolderState] = field(default_factory=dict)
    unallocated: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    energy_last: dict[str, float] = field(default_factory=dict)
    mig_known: dict[str, MigLocation] = field(default_factory=dict)
    inventory: dict[str, str] = field(default_factory=dict)  # physical GPU uuid -> model
    inventory_index: dict[str, str] = field(default_factory=dict)
    capped_seconds_total: float = 0.0
    bad_readings_total: int = 0
    device_util: dict[tuple[str, str], tuple[float | None, str, str | None]] = field(default_factory=dict)
    device_readings: dict[tuple[str, str], DcgmDevice] = field(default_factory=dict)
    unmeasured_devices: int = 0

    # -- the tick -----------------------------------------------------------------------------------
    def tick(self, now: float, attribution: Attribution | None,
             dcgm: dict[tuple[str, str], DcgmDevice] | None, cap: float) -> TickStats:
        """Charge [last_tick, now] to this tick's observation. ``attribution`` None = holders unknown."""
        stats = TickStats()
        elapsed = 0.0 if self.last_tick is None else max(0.0, now - self.last_tick)
        dt = min(elapsed, cap)
        stats.capped_seconds = elapsed - dt
        stats.charged_seconds = dt
        self.capped_seconds_total += stats.capped_seconds
        self.last_tick = now
        self.seq += 1

        if dcgm:
            self._learn_inventory(dcgm)
        energy_delta = self._energy_deltas(dcgm) if dcgm else {}
        self._record_device_util(dcgm)
        if attribution is None:
            return stats
        self.mig_known.update(attribution.learned)
        stats.unresolved = len(attribution.unresolved)

        groups: dict[str, list[Assignment]] = defaultdict(list)
        for a in attribution.assignments:
            groups[a.charge_group].append(a)
        seen: set[str] = set()
        held_by_model: dict[str, float] = defaultdict(float)
        for members in groups.values():
            first = members[0]
            raw = None
            if dcgm is not None and first.dcgm_key is not None and first.dcgm_key in dcgm:
                raw = dcgm[first.dcgm_key].utilization_raw
            util, bad = clamp_utilization(raw)
            if bad:
                stats.bad_readings += 1
            if util is None:
                stats.unmeasured_devices += 1
            gpu_energy = energy_delta.get(first.gpu_uuid, 0.0)
            if first.kind is DeviceKind.REPLICA:
                charges = charge_shared([Holding(a.holder_key, a.fraction) for a in members], dt,
                                        Reading(util, gpu_energy))
            else:
                charges = {a.holder_key: charge_exclusive(a.fraction, dt, Reading(util, gpu_energy * a.fraction))
                           for a in members}
            for a in members:
                state = self.holders.get(a.holder_key)
                if state is None:
                    state = self.holders[a.holder_key] = HolderState(
                        a.namespace, a.pod, a.container, a.device_id, a.gpu_uuid, a.model, a.mig_profile,
                        a.fraction)
                else:
                    state.gpu_uuid = a.gpu_uuid or state.gpu_uuid
                    state.model = a.model or state.model
                    state.mig_profile = a.mig_profile or state.mig_profile
                    state.fraction = a.fraction
                state.usage.add(charges.get(a.holder_key, Usage()))
                state.active = True
                state.last_active = now
                state.utilization = util
                seen.add(a.holder_key)
                held_by_model[a.model or UNKNOWN_MODEL] += a.fraction
        for key, state in self.holders.items():
            if key not in seen:
                state.active = False
                state.utilization = None
        self.bad_readings_total += stats.bad_readings
        self.unmeasured_devices = stats.unmeasured_devices

        capacity: dict[str, float] = defaultdict(float)
        for model in self.inventory.values():
            capacity[model or UNKNOWN_MODEL] += 1.0
        for model, cap_gpus in capacity.items():
            self.unallocated[model] += dt * max(0.0, cap_gpus - held_by_model.get(model, 0.0))
        return stats

    def _learn_inventory(self, dcgm: dict[tuple[str, str], DcgmDevice]) -> None:
        inventory: dict[str, str] = {}
        for dev in dcgm.values():
            inventory[dev.gpu_uuid] = dev.model or inventory.get(dev.gpu_uuid) or self.inventory.get(
                dev.gpu_uuid, UNKNOWN_MODEL)
            self.inventory_index[dev.gpu_uuid] = dev.index
        self.inventory = inventory

    def _energy_deltas(self, dcgm: dict[tuple[str, str], DcgmDevice]) -> dict[str, float]:
        """Energy used per physical GPU since the last tick (GPU-wide: read once per GPU, never summed)."""
        current: dict[str, float] = {}
        for dev in dcgm.values():
            if dev.energy is not None and dev.gpu_uuid not in current:
                current[dev.gpu_uuid] = dev.energy
        deltas: dict[str, float] = {}
        for uuid, value in current.items():
            last = self.energy_last.get(uuid)
            if last is not None:
                deltas[uuid] = value - last if value >= last else value  # driver reload resets it
            self.energy_last[uuid] = value
        return deltas

    def _record_device_util(self, dcgm: dict[tuple[str, str], DcgmDevice] | None) -> None:
        self.device_readings = dict(dcgm or {})
        self.device_util = {}
        for key, dev in (dcgm or {}).items():
            util, _bad = clamp_utilization(dev.utilization_raw)
            self.device_util[key] = (util, dev.model or self.inventory.get(dev.gpu_uuid, UNKNOWN_MODEL),
                                     dev.mig_profile)

    # -- retention ----------------------------------------------------------------------------------
    def drop_acknowledged(self, now: float, acked_until: float | None, retention: float, safety: float) -> int:
        """Forget gone pods' counters once the aggregator booked them (or after the safety period)."""
        gone = [
            key for key, s in self.holders.items()
            if not s.active and (
                (acked_until is not None and s.last_active <= acked_until and now - s.last_active > retention)
                or now - s.last_active > safety)
        ]
        for key in gone:
            del self.holders[key]
        return len(gone)

    # -- publication --------------------------------------------------------------------------------
    def snapshot(self, now: float, dcgm_up: bool, podresources_up: bool) -> UsageSnapshot:
        held: dict[str, float] = defaultdict(float)
        for s in self.holders.values():
            if s.active and s.gpu_uuid:
                held[s.gpu_uuid] += s.fraction
        utils: dict[str, float | None] = {}
        for (uuid, gi), (util, _m, _p) in self.device_util.items():
            if gi == "":
                utils[uuid] = util
        return UsageSnapshot(
            node=self.node, epoch=self.epoch, timestamp=now, seq=self.seq,
            dcgm_up=dcgm_up, podresources_up=podresources_up,
            holders=[
                HolderCounters(
                    namespace=s.namespace, pod=s.pod, container=s.container, device_id=s.device_id,
                    gpu_uuid=s.gpu_uuid, gpu_model=s.model, mig_profile=s.mig_profile, fraction=s.fraction,
                    active=s.active, allocated_s=s.usage.allocated, used_s=s.usage.used,
                    unmeasured_s=s.usage.unmeasured, energy_j=s.usage.energy_j, utilization=s.utilization)
                for s in self.holders.values()
            ],
            unallocated=[UnallocatedCounter(gpu_model=m, seconds=v) for m, v in sorted(self.unallocated.items())],
            capacity=[GpuCapacity(gpu_uuid=u, gpu_model=m, index=self.inventory_index.get(u, ""),
                                  utilization=utils.get(u), held_fraction=min(held.get(u, 0.0), 1.0))
                      for u, m in sorted(self.inventory.items())],
        )
