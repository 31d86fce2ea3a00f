"""Publication: the meter as the ``/v1/usage`` wire snapshot (what the aggregator books)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING

from exporter.model.usage import GpuCapacity, HolderCounters, UnallocatedCounter, UsageSnapshot

if TYPE_CHECKING:
    from exporter.agent.meter import Meter


def snapshot_of(meter: Meter, now: float, *, dcgm_up: bool, podresources_up: bool) -> UsageSnapshot:
    """Everything cumulative, plus what each GPU is doing now (for the aggregator's gauges)."""
    held: dict[str, float] = defaultdict(float)
    for s in meter.holders.values():
        if s.active and s.gpu_uuid:
            held[s.gpu_uuid] += s.fraction
    utils: dict[str, float | None] = {}
    for (uuid, gi), (util, _m, _p) in meter.device_util.items():
        if gi == "":
            utils[uuid] = util
    return UsageSnapshot(
        node=meter.node, epoch=meter.epoch, timestamp=now, started_at=meter.started_at, seq=meter.seq,
        dcgm_up=dcgm_up, podresources_up=podresources_up,
        holders=[
            HolderCounters(
                namespace=s.namespace, pod=s.pod, container=s.container, device_id=s.device_id,
                gpu_uuid=s.gpu_uuid, gpu_model=s.model, mig_profile=s.mig_profile, fraction=s.fraction,
                active=s.active, allocated_s=s.usage.allocated, used_s=s.usage.used,
                unmeasured_s=s.usage.unmeasured, energy_j=s.usage.energy_j, utilization=s.utilization,
                fb_peak_bytes=s.fb_peak_bytes, fb_peak_hour=s.fb_peak_hour, claim=s.claim,
                sharing=s.sharing, split_s=s.usage.split)
            for s in meter.holders.values()
        ],
        unallocated=_capacity_counters(meter.unallocated, meter.energy.unallocated),
        unobserved=_capacity_counters(meter.unobserved, meter.energy.unobserved),
        capacity=[GpuCapacity(gpu_uuid=u, gpu_model=m, index=meter.inventory_index.get(u, ""),
                              utilization=utils.get(u), held_fraction=min(held.get(u, 0.0), 1.0))
                  for u, m in sorted(meter.inventory.items())],
        unmeasured_energy_s=meter.energy.unmeasured_s,
    )


def _capacity_counters(seconds: Mapping[str, float], joules: Mapping[str, float]) -> list[UnallocatedCounter]:
    """One counter per model with seconds or energy (a fully held GPU may still leave energy unallocated)."""
    return [UnallocatedCounter(gpu_model=m, seconds=seconds.get(m, 0.0), energy_j=joules.get(m, 0.0))
            for m in sorted(set(seconds) | set(joules))]
