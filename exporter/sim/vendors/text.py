"""The exposition bodies of AMD's device-metrics-exporter, Intel's gaudi-metric-exporter, dcgm-exporter's
per-pod series and HAMi's vGPU monitor, for one simulated node, with the real components' names, labels,
units and limits.

* device-metrics-exporter: one series set per logical GPU (a whole GPU or a compute partition; ``gpu_id``
  counts partitions), percent, MB, W and accumulated microjoules; the holder's ``pod``/``namespace``/``container``
  labels (it joins pods itself); on a partitioned GPU activity and power for partition 0 only, the others
  read 0 ("amdsmi does not return per-partition activity data").
* gaudi-metric-exporter: ``habanalabs_*`` with ``Serial``/``UUID``/``device``/``id``/``driver`` and
  ``pod_namespace``/``pod_name`` (no container, no model), power in mW.
* dcgm-exporter ``--kubernetes-virtual-gpus``: one extra ``DCGM_FI_DEV_GPU_UTIL`` series per pod and replica
  it holds (``pod_uid``, ``vgpu``), the pod's own percent; the device series then has no pod labels.
* HAMi monitor: ``hami_container_device_utilization_ratio`` per container and GPU (percent despite the name).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from exporter.sim.dcgm_text import DcgmEntity, NodeReadings
from exporter.sim.hardware import DRIVER_VERSION, framebuffer_mib
from exporter.sim.kube.objects import stable_uid
from exporter.sim.layout import NodeLayout
from exporter.sim.spec import Hold
from exporter.sim.vendors.devices import amd_gpu_uuid, serial

AMD_DRIVER = "6.12.12"
GAUDI_DRIVER = "1.21.0-ca59b5a"


def _holder(holds: list[Hold]) -> tuple[str, str, str]:
    if not holds:
        return ("", "", "")
    p = holds[0].pod
    return (p.namespace, p.name, p.container)


@dataclass(frozen=True, slots=True)
class _Row:
    """One device's series in the exporter's own units."""

    labels: str
    busy_percent: float
    power_w: float
    energy: float  # device-metrics-exporter: microjoules; gaudi-metric-exporter: its undocumented unit
    used_mb: float


def _families(rows: list[_Row], specs: list[tuple[str, str, Callable[[_Row], str]]]) -> str:
    out: list[str] = []
    for name, help_text, value in specs:
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
        out.extend(f"{name}{{{r.labels}}} {value(r)}\n" for r in rows)
    return "".join(out)


def amd_text(layout: NodeLayout, *, holders: dict[str, list[Hold]], readings: NodeReadings) -> str:
    """device-metrics-exporter's ``/metrics`` for an AMD node (no name prefix, as the chart's default)."""
    spec = layout.spec
    mode = spec.partition or "spx"
    per_gpu = max(1, len(layout.gpus[0].partitions)) if layout.gpus else 1
    total = int(framebuffer_mib(spec.model) / per_gpu)
    rows: list[_Row] = []
    for gpu in layout.gpus:
        parts = gpu.partitions or [gpu.uuid]
        for k, device in enumerate(parts):
            ns, pod, ctr = _holder(holders.get(device, []))
            first = k == 0  # activity and power are given for partition 0 only
            labels = (f'card_model="102-G30211-0C",card_series="{spec.model}",card_vendor="AMD",'
                      f'cluster_name="",container="{ctr}",driver_version="{AMD_DRIVER}",'
                      f'gpu_compute_partition_type="{mode}",gpu_id="{gpu.index * len(parts) + k}",'
                      f'gpu_memory_partition_type="nps1",gpu_partition_id="{k if gpu.partitions else "NA"}",'
                      f'gpu_uuid="{amd_gpu_uuid(spec.name, gpu.index * 16 + k)}",hostname="{readings.hostname}",'
                      f'job_id="",job_partition="",job_user="",namespace="{ns}",pod="{pod}",'
                      f'serial_number="{serial(spec.name, gpu.index, prefix="6924")}"')
            rows.append(_Row(labels, 100 * readings.util.get(device, 0.0) if first else 0.0,
                             readings.power_w[gpu.uuid] if first else 0.0,
                             readings.energy_mj.get(gpu.uuid, 0.0) * 1000 if first else 0.0,
                             300 + (0.7 * total if ns else 0.0)))
    return _families(rows, [
        ("gpu_gfx_activity", "Graphics engine usage in Percentage (0-100)", lambda r: f"{r.busy_percent:g}"),
        ("gpu_package_power", "Current socket power in Watts", lambda r: f"{r.power_w:g}"),
        ("gpu_energy_consumed", "Accumulated energy consumed by the GPU in uJ", lambda r: f"{r.energy:.1f}"),
        ("gpu_used_vram", "Used VRAM memory of the GPU (in MB)", lambda r: f"{int(r.used_mb)}"),
        ("gpu_total_vram", "Total VRAM memory of the GPU (in MB)", lambda r: str(total)),
        ("gpu_free_vram", "Free VRAM memory of the GPU (in MB)", lambda r: f"{total - int(r.used_mb)}")])


def gaudi_text(layout: NodeLayout, *, holders: dict[str, list[Hold]], readings: NodeReadings) -> str:
    """gaudi-metric-exporter's ``/metrics`` for a Gaudi node (memory in bytes, power in mW)."""
    total = framebuffer_mib(layout.spec.model) * 1048576
    rows: list[_Row] = []
    for gpu in layout.gpus:
        ns, pod, _ctr = _holder(holders.get(gpu.uuid, []))
        labels = (f'Serial="{gpu.uuid}",UUID="01P{gpu.index}-HL325-{gpu.uuid}",device="{gpu.uuid}",id="{gpu.index}",'
                  f'driver="{GAUDI_DRIVER}",pod_namespace="{ns}",pod_name="{pod}"')
        rows.append(_Row(labels, 100 * readings.util.get(gpu.uuid, 0.0), readings.power_w[gpu.uuid],
                         readings.energy_mj.get(gpu.uuid, 0.0), (0.7 if ns else 0.01) * total / 1048576))
    return _families(rows, [
        ("habanalabs_utilization", "Utilization of the device", lambda r: f"{round(r.busy_percent)}"),
        ("habanalabs_power_mW", "Power usage in milli-watts", lambda r: f"{round(r.power_w * 1000)}"),
        ("habanalabs_energy", "Energy usage", lambda r: f"{int(r.energy)}"),
        ("habanalabs_memory_used_bytes", "Current used bytes of memory", lambda r: str(int(r.used_mb * 1048576))),
        ("habanalabs_memory_total_bytes", "Total memory on device", lambda r: str(total)),
        ("habanalabs_memory_free_bytes", "Current free bytes of memory",
         lambda r: str(total - int(r.used_mb * 1048576)))])


def dcgm_per_pod_lines(rows: list[DcgmEntity], *, holders: dict[str, list[Hold]], readings: NodeReadings,
                       t: float) -> list[str]:
    """dcgm-exporter's per-pod ``DCGM_FI_DEV_GPU_UTIL`` series: one per (pod, replica) it holds on each GPU."""
    host = f'Hostname="{readings.hostname}",DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"'
    out = []
    for e in rows:
        if e.mig:
            continue
        for k in range(e.gpu.replicas):
            for h in holders.get(f"{e.gpu.uuid}::{k}", []):
                p = h.pod
                out.append(f'DCGM_FI_DEV_GPU_UTIL{{{e.labels},{host},container="{p.container}",'
                           f'namespace="{p.namespace}",pod="{p.name}",'
                           f'pod_uid="{stable_uid(f"pod/{p.namespace}/{p.name}")}",vgpu="{k}"}} '
                           f"{round(p.util_at(t) * 100)}\n")
    return out


def hami_monitor_text(layout: NodeLayout, *, holders: dict[str, list[Hold]], t: float) -> str:
    """HAMi's vGPU monitor ``/metrics`` (v2.9+ names): each HAMi container's utilisation per GPU it shares."""
    out = ["# HELP hami_container_device_utilization_ratio Container device utilization ratio\n",
           "# TYPE hami_container_device_utilization_ratio gauge\n"]
    for gpu in layout.gpus:
        for h in holders.get(gpu.uuid, []):
            p = h.pod
            out.append(f'hami_container_device_utilization_ratio{{namespace="{p.namespace}",pod="{p.name}",'
                       f'container="{p.container}",vdevice_index="{h.device}",device_uuid="{gpu.uuid}",'
                       f'zone="vGPU"}} {round(p.util_at(t, h.device) * 100)}\n')
    return "".join(out)
