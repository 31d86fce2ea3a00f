"""The utilisation and energy model: what each GPU entity is doing now, and the energy it has used.

DCGM reports one reading per physical GPU (or per MIG instance), not per holder, so the sum of the
holders' utilisation is what the device shows: a shared GPU reads their sum, capped at 1.
"""

from __future__ import annotations

from typing import Any

from exporter.model.devices import gpu_slices, profile_slices
from exporter.model.plausibility import MAX_GPU_WATTS
from exporter.sim.hardware import PowerRange, power_range
from exporter.sim.layout import GpuLayout, NodeLayout
from exporter.sim.scenario_ctx import Ctx
from exporter.sim.spec import Hold


def node_power(ctx: Ctx, raw: Any, *, where: str) -> PowerRange:
    """A node's ``power: {idle_w, max_w}``: watts at idle and at full load, ``0 <= idle_w <= max_w``, at most the
    board power booking believes (``MAX_GPU_WATTS``), so every joule the node serves can be booked."""
    value = ctx.mapping(raw, where)
    ctx.known_keys(value, {"idle_w", "max_w"}, where=where)
    for key in ("idle_w", "max_w"):
        if key not in value:
            raise ctx.fail(f"{where}.{key}", "required (watts)")
    max_w = ctx.number(value["max_w"], f"{where}.max_w", lo=0, hi=MAX_GPU_WATTS)
    idle_w = ctx.number(value["idle_w"], f"{where}.idle_w", lo=0, hi=max_w)
    return PowerRange(idle_w, max_w)


def gpu_utilization(layout: NodeLayout, holders: dict[str, list[Hold]], *, t: float) -> dict[str, float]:
    """Entity key (GPU uuid, or MIG uuid) -> utilisation served by DCGM at scenario time ``t``.

    Each holder contributes its value for that device (``per_device`` pods differ per device)."""
    out: dict[str, float] = {}
    for gpu in layout.gpus:
        if gpu.mig:
            for inst in gpu.mig:
                out[inst.uuid] = sum(h.pod.util_at(t, h.device) for h in holders.get(inst.uuid, []))
        elif gpu.replicas:
            # The sum of its holders' (pods') values, capped at 1: a pod with two replicas counts once.
            sharing = {(h.pod.namespace, h.pod.name): h.pod for k in range(gpu.replicas)
                       for h in holders.get(f"{gpu.uuid}::{k}", [])}
            out[gpu.uuid] = min(1.0, sum(p.util_at(t) for p in sharing.values()))
        elif gpu.partitions:  # AMD compute partitions: each its holder's; the GPU the mean of its partitions
            for pid in gpu.partitions:
                out[pid] = min(1.0, sum(h.pod.util_at(t, h.device) for h in holders.get(pid, [])))
            out[gpu.uuid] = sum(out[p] for p in gpu.partitions) / len(gpu.partitions)
        else:  # one holder, or HAMi pods sharing it: their sum, capped at 1
            out[gpu.uuid] = min(1.0, sum(h.pod.util_at(t, h.device) for h in holders.get(gpu.uuid, [])))
    return out


def gpu_power(model: str, gpu: GpuLayout, *, util: dict[str, float], watts: PowerRange | None = None) -> float:
    """Board power in watts (``watts``: the node's own, else the model's): a MIG GPU's busy share is its
    instances' utilisation weighted by slices."""
    watts = watts or power_range(model)
    if gpu.mig:
        slices = gpu_slices(model)
        busy = sum(util[i.uuid] * profile_slices(i.profile) / slices for i in gpu.mig)
    else:
        busy = util[gpu.uuid]
    return float(watts.idle_w + busy * (watts.max_w - watts.idle_w))


class EnergyMeter:
    """Integrates board power into the cumulative mJ counter DCGM exposes, piecewise constant per step."""

    def __init__(self) -> None:
        self.mj: dict[str, float] = {}
        self.t = 0.0  # every node is integrated up to here

    def add(self, layout: NodeLayout, util: dict[str, float], *, dt: float) -> None:
        """Add ``dt`` seconds of one node's GPUs drawing power at ``util``."""
        for gpu in layout.gpus:
            self.mj[gpu.uuid] = self.mj.get(gpu.uuid, 0.0) + gpu_power(layout.spec.model, gpu, util=util,
                                                                          watts=layout.spec.power) * dt * 1000.0
