"""DCGM Exporter's text exposition for one node, as dcgm-exporter 4.x writes it.

One ``DcgmEntity`` per row DCGM reports (a whole GPU, or a MIG instance), each field family written
for every entity in the order and with the HELP texts the real exporter uses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from exporter.model.devices import gpu_slices, profile_slices
from exporter.sim.hardware import DRIVER_VERSION, framebuffer_mib
from exporter.sim.layout import GpuLayout, NodeLayout
from exporter.sim.spec import Hold, PodSpec

MIB = 1048576


@dataclass(frozen=True, slots=True)
class DcgmEntity:
    """One DCGM row: its identity labels and the readings every field family is derived from."""

    labels: str  # gpu, UUID, pci_bus_id, device, modelName (+ GPU_I_PROFILE, GPU_I_ID)
    mig: bool
    util: float
    fb_total_mib: float
    fb_used_mib: float
    pod: dict[str, str]  # the pod labels dcgm-exporter adds with --kubernetes (empty when unheld/off)
    gpu: GpuLayout


def fb_used_mib(pods: list[PodSpec], *, total_mib: float, util: float, t: float) -> float:
    """What DCGM reads as used on one entity: the holders' ``framebuffer`` summed (DCGM counts whole MiB:
    rounded up), or, when none gives one, 300 MiB + 70 % of the memory while held or busy; below the total."""
    given = [b for p in pods if (b := p.framebuffer_at(t)) is not None]
    if given:
        return float(min(total_mib - 1, math.ceil(sum(given) / MIB)))
    held = bool(pods) or util > 0
    return min(total_mib - 1, 300 + (0.7 * total_mib if held else 0.0))


@dataclass(frozen=True, slots=True)
class NodeReadings:
    """What the node's GPUs are doing now, from the utilisation and energy model."""

    util: dict[str, float]  # entity key -> utilisation
    power_w: dict[str, float]  # GPU uuid -> board power
    energy_mj: dict[str, float]  # GPU uuid -> cumulative energy
    hostname: str


def _pod_labels(pods: list[PodSpec], on: bool) -> dict[str, str]:
    if not pods or not on:
        return {}
    p = pods[0]
    return {"container": p.container, "namespace": p.namespace, "pod": p.name}


def _pods(holds: list[Hold]) -> list[PodSpec]:
    """The distinct pods of a device's holds (a pod holding two replicas of one GPU counts once)."""
    seen: dict[tuple[str, str], PodSpec] = {}
    for h in holds:
        seen.setdefault((h.pod.namespace, h.pod.name), h.pod)
    return list(seen.values())


def entities(layout: NodeLayout, *, util: dict[str, float], holders: dict[str, list[Hold]], t: float,
             pod_labels: bool = True) -> list[DcgmEntity]:
    """The rows DCGM reports: one per whole GPU, one per MIG instance (never one per replica). A MIG
    instance's framebuffer is its own (DCGM measures it per instance); a shared GPU's is its holders' sum."""
    spec = layout.spec
    fb_total = framebuffer_mib(spec.model)
    slices = gpu_slices(spec.model)
    out: list[DcgmEntity] = []
    for gpu in layout.gpus:
        base = (f'gpu="{gpu.index}",UUID="{gpu.uuid}",pci_bus_id="{gpu.pci_bus_id}",'
                f'device="nvidia{gpu.index}",modelName="{spec.model}"')
        if gpu.mig:
            for inst in gpu.mig:
                labels = f'{base},GPU_I_PROFILE="{inst.profile}",GPU_I_ID="{inst.gpu_instance_id}"'
                total = fb_total * profile_slices(inst.profile) / slices
                pods = _pods(holders.get(inst.uuid, []))
                used = fb_used_mib(pods, total_mib=total, util=util[inst.uuid], t=t)
                out.append(DcgmEntity(labels, True, util[inst.uuid], total, used, _pod_labels(pods, pod_labels), gpu))
        else:
            keys = [f"{gpu.uuid}::{k}" for k in range(gpu.replicas)] if gpu.replicas else [gpu.uuid]
            pods = _pods([h for key in keys for h in holders.get(key, [])])
            used = fb_used_mib(pods, total_mib=float(fb_total), util=util[gpu.uuid], t=t)
            out.append(DcgmEntity(base, False, util[gpu.uuid], float(fb_total), used,
                                  _pod_labels(pods[:1], pod_labels), gpu))
    return out


def render(layout: NodeLayout, rows: list[DcgmEntity], *, readings: NodeReadings,
           per_pod: Sequence[str] = ()) -> str:
    """The ``/metrics`` body for one node; ``per_pod``: per-pod GPU_UTIL lines after the device ones."""
    host = f'Hostname="{readings.hostname}",DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"'
    out: list[str] = []

    def lbl(e: DcgmEntity) -> str:
        extra = "".join(f',{k}="{v}"' for k, v in e.pod.items())
        return f"{e.labels},{host}{extra}"

    def family(name: str, mtype: str, *, help_text: str, value: Callable[[DcgmEntity], str],
               only: list[DcgmEntity] | None = None) -> None:
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} {mtype}\n")
        out.extend(f"{name}{{{lbl(e)}}} {value(e)}\n" for e in (rows if only is None else only))

    family("DCGM_FI_DEV_SM_CLOCK", "gauge", help_text="SM clock frequency (in MHz).",
           value=lambda e: str(1980 if e.util > 0 else 345))
    family("DCGM_FI_DEV_MEM_CLOCK", "gauge", help_text="Memory clock frequency (in MHz).", value=lambda e: "2619")
    family("DCGM_FI_DEV_MEMORY_TEMP", "gauge", help_text="Memory temperature (in C).",
           value=lambda e: str(int(38 + 30 * e.util)))
    family("DCGM_FI_DEV_GPU_TEMP", "gauge", help_text="GPU temperature (in C).",
           value=lambda e: str(int(33 + 40 * e.util)))
    family("DCGM_FI_DEV_POWER_USAGE", "gauge", help_text="Power draw (in W).",
           value=lambda e: f"{readings.power_w[e.gpu.uuid]:.6f}")
    if layout.spec.dcgm_energy:
        family("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
               help_text="Total energy consumption since boot (in mJ).",
               value=lambda e: str(int(readings.energy_mj.get(e.gpu.uuid, 0.0))))
    family("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", help_text="Total number of PCIe retries.", value=lambda e: "0")
    whole = [e for e in rows if not e.mig]
    if whole:
        family("DCGM_FI_DEV_GPU_UTIL", "gauge", help_text="GPU utilization (in %).",
               value=lambda e: str(round(e.util * 100)), only=whole)
        out.extend(per_pod)
        family("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", help_text="Memory utilization (in %).",
               value=lambda e: str(round(e.util * 40)), only=whole)
    family("DCGM_FI_DEV_ENC_UTIL", "gauge", help_text="Encoder utilization (in %).", value=lambda e: "0")
    family("DCGM_FI_DEV_DEC_UTIL", "gauge", help_text="Decoder utilization (in %).", value=lambda e: "0")
    family("DCGM_FI_DEV_FB_FREE", "gauge", help_text="Framebuffer memory free (in MiB).",
           value=lambda e: str(int(e.fb_total_mib - e.fb_used_mib)))
    family("DCGM_FI_DEV_FB_USED", "gauge", help_text="Framebuffer memory used (in MiB).",
           value=lambda e: str(int(e.fb_used_mib)))
    family("DCGM_FI_DEV_FB_RESERVED", "gauge", help_text="Framebuffer memory reserved (in MiB).", value=lambda e: "510")
    if "L4" not in layout.spec.model:
        family("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
               help_text="Total number of NVLink bandwidth counters for all lanes.", value=lambda e: "0")
    family("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", help_text="vGPU License status", value=lambda e: "0")
    family("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
           help_text="Number of remapped rows for uncorrectable errors", value=lambda e: "0")
    family("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
           help_text="Number of remapped rows for correctable errors", value=lambda e: "0")
    family("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", help_text="Whether remapping of rows has failed",
           value=lambda e: "0")
    family("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", help_text="Ratio of time the graphics engine is active.",
           value=lambda e: f"{e.util:.6f}")
    family("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", help_text="Ratio of cycles the tensor (HMMA) pipe is active.",
           value=lambda e: f"{e.util * 0.8:.6f}")
    family("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", help_text="Ratio of cycles the device memory interface is active "
           "sending or receiving data.", value=lambda e: f"{e.util * 0.6:.6f}")
    family("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", help_text="The rate of data transmitted over the PCIe bus - "
           "including both protocol headers and data payloads - in bytes per second.",
           value=lambda e: str(int(1_000_000 + e.util * 3e7)))
    family("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", help_text="The rate of data received over the PCIe bus - "
           "including both protocol headers and data payloads - in bytes per second.",
           value=lambda e: str(int(2_000_000 + e.util * 9e7)))
    return "".join(out)
