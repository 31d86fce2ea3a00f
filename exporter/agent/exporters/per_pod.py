"""Measured per-pod use of shared GPUs, as the node's exporters publish it.

Two sources measure each pod's SM use of a shared NVIDIA GPU from NVML's per-process utilisation:
dcgm-exporter's per-process ``DCGM_FI_DEV_GPU_UTIL`` series (4.5.3-4.8.2 on, one extra series per pod,
labelled ``pod_uid``; deduplicated on ``UUID`` + ``pod_uid`` since every container and every replica of a
pod repeats the pod's total) and HAMi's vGPU monitor (``hami_container_device_utilization_ratio``, legacy
``Device_utilization_desc_of_container``, per container, ``device_uuid`` = DCGM's ``UUID``). Both are
percent gauges read at scrape time.

How a shared GPU's busy time is split by these values is ``holders.measured``'s job. Pure; bad samples
are refused and counted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from exporter.model.samples import Sample

DCGM_UTIL = "DCGM_FI_DEV_GPU_UTIL"
HAMI_UTIL = ("hami_container_device_utilization_ratio", "Device_utilization_desc_of_container")
#: HAMi's label names: current, then legacy (``--legacy-metrics``).
_HAMI_LABELS = (("namespace", "pod", "device_uuid"), ("podnamespace", "podname", "deviceuuid"))
PodKey = tuple[str, str]


@dataclass(slots=True)
class PodUse:
    """Measured utilisation (ratio, may exceed 1 as a sum of processes) per physical GPU per pod."""

    by_gpu: dict[str, dict[PodKey, float]] = field(default_factory=dict)
    refused: int = 0

    def merge(self, other: PodUse) -> None:
        """Add another source's GPUs; a GPU both sources measure keeps the first source's values."""
        for gpu, pods in other.by_gpu.items():
            self.by_gpu.setdefault(gpu, pods)
        self.refused += other.refused


def _value(s: Sample) -> float | None:
    v = s.value
    return None if math.isnan(v) or math.isinf(v) or v < 0 else v / 100.0


def dcgm_pod_use(samples: Iterable[Sample]) -> PodUse:
    """dcgm-exporter's per-pod ``DCGM_FI_DEV_GPU_UTIL`` series (those with ``pod_uid``); device series skipped."""
    out = PodUse()
    seen: dict[tuple[str, str], float | None] = {}
    pods: dict[tuple[str, str], PodKey] = {}
    for s in samples:
        if s.name != DCGM_UTIL or "pod_uid" not in s.labels:
            continue
        labels = s.labels
        uuid, uid, ns, pod = (labels.get(k, "") for k in ("UUID", "pod_uid", "namespace", "pod"))
        value = _value(s)
        if not (uuid and uid and ns and pod) or value is None or labels.get("GPU_I_ID"):
            out.refused += 1  # no identity, a bad value, or MIG (no per-process utilisation there)
            continue
        key = (uuid, uid)
        if key in seen:  # every container and replica of a pod repeats its total: equal copies are one
            if seen[key] != value:
                out.refused += 1
                seen[key] = None
            continue
        seen[key], pods[key] = value, (ns, pod)
    for (uuid, uid), value in seen.items():
        if value is not None:
            out.by_gpu.setdefault(uuid, {})[pods[(uuid, uid)]] = value
    return out


def hami_pod_use(samples: Iterable[Sample]) -> PodUse:
    """HAMi monitor's per-container utilisation, summed per pod and GPU."""
    out = PodUse()
    seen: set[tuple[str, ...]] = set()
    for s in samples:
        if s.name not in HAMI_UTIL:
            continue
        names = _HAMI_LABELS[HAMI_UTIL.index(s.name)]
        ns, pod, uuid = (s.labels.get(k, "") for k in names)
        ctr = s.labels.get("container") or s.labels.get("ctrname") or ""
        value = _value(s)
        ident = (uuid, ns, pod, ctr, s.labels.get("vdevice_index") or s.labels.get("vdeviceid") or "")
        if not (ns and pod and uuid) or value is None or ident in seen:
            out.refused += 1
            continue
        seen.add(ident)
        per_pod = out.by_gpu.setdefault(uuid[:40], {})
        per_pod[(ns, pod)] = per_pod.get((ns, pod), 0.0) + value
    return out
