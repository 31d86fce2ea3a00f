"""KAI Scheduler GPU fractions: the reservation pod's GPU handed to the pods of its GPU group, pure.

A pod asking KAI for part of a GPU (annotation ``gpu-fraction`` or ``gpu-memory``) requests no
``nvidia.com/gpu``; KAI's binder starts a reservation pod that does, so the kubelet lists the GPU on the
reservation pod. The reservation pod is recognised on its object (namespace ``kai-resource-reservation``
or the configured one, label ``app: kai-resource-reservation``, name prefix ``gpu-reservation`` -- never
the full name, which changed in v0.16); its label ``runai-gpu-group`` names the group. A sharer carries
the same group in ``runai-gpu-group`` (one GPU) or one ``runai-gpu-group/<id>: <id>`` per GPU (a
multi-device fraction), and holds ``portion`` of each: its ``gpu-fraction``; for a ``gpu-memory`` pod
the ``GPU_PORTION`` its binder wrote, else memory / the GPU's memory. The reservation pod itself holds
nothing: what the portions leave is the GPU's unallocated time, like any free capacity. Shares of one
GPU split its busy time as time-slicing replicas do (measured per-pod use where every sharer has it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from exporter.agent.holders.assignment import Assignment
from exporter.model.devices import DeviceKind, SharingMode, parse_device_id
from exporter.model.pod_resources import ContainerDevices

RESERVATION_NAMESPACE = "kai-resource-reservation"
RESERVATION_APP = "kai-resource-reservation"
RESERVATION_PREFIX = "gpu-reservation"
GROUP_LABEL = "runai-gpu-group"
FRACTION = "gpu-fraction"
MEMORY = "gpu-memory"
CONTAINER = "gpu-fraction-container-name"
CONFIGMAP = "runai/shared-gpu-configmap"
PORTION_KEY = "GPU_PORTION"
PodKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class KaiSharer:
    """A pod sharing KAI-reserved GPUs: its groups and what it asked of each GPU."""

    namespace: str
    pod: str
    container: str  # the container the fraction goes to (``gpu-fraction-container-name``, else the first)
    container_index: int  # its index in spec.containers: the suffix of its ConfigMap's name
    groups: frozenset[str]
    fraction: float | None  # ``gpu-fraction``; None for a ``gpu-memory`` pod
    memory_mib: float | None  # ``gpu-memory``
    configmap: str = ""  # ``runai/shared-gpu-configmap``: the base name of its ConfigMaps

    @property
    def configmap_name(self) -> str:
        """The ConfigMap the binder fills for the fraction's container: ``<base>-<container index>``."""
        return f"{self.configmap}-{self.container_index}" if self.configmap else ""


def _meta(pod: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    meta = pod.get("metadata") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    return labels, annotations


def reservation_group(pod: Mapping[str, Any], *, namespace: str = RESERVATION_NAMESPACE) -> str | None:
    """The GPU group of a KAI reservation pod ("" when unlabelled); None when ``pod`` is not one."""
    meta = pod.get("metadata") or {}
    labels, _ = _meta(pod)
    if (meta.get("namespace") != namespace or labels.get("app") != RESERVATION_APP
            or not str(meta.get("name", "")).startswith(RESERVATION_PREFIX)):
        return None
    return labels.get(GROUP_LABEL, "")


def parse_portion(text: object) -> float | None:
    """A portion of one GPU, 0 < v <= 1 (``"0.5"``); None when absent or not such a number."""
    try:
        value = float(str(text))
    except ValueError:
        return None
    return value if 0.0 < value <= 1.0 else None


def _memory(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None


def kai_sharer(pod: Mapping[str, Any]) -> KaiSharer | None:
    """A pod's KAI share from its labels and annotations; None when it shares no KAI group."""
    meta = pod.get("metadata") or {}
    labels, annotations = _meta(pod)
    groups = {labels[GROUP_LABEL]} if labels.get(GROUP_LABEL) else set()
    groups |= {k.split("/", 1)[1] for k in labels if k.startswith(f"{GROUP_LABEL}/") and k.split("/", 1)[1]}
    fraction = parse_portion(annotations[FRACTION]) if FRACTION in annotations else None
    memory = _memory(annotations.get(MEMORY))
    if not groups or (fraction is None and memory is None):
        return None
    names = [str((c or {}).get("name", "")) for c in (pod.get("spec") or {}).get("containers") or []]
    container = annotations.get(CONTAINER) or (names[0] if names else "")
    index = names.index(container) if container in names else 0
    return KaiSharer(str(meta.get("namespace", "")), str(meta.get("name", "")), container, index,
                     frozenset(groups), fraction, None if fraction is not None else memory,
                     annotations.get(CONFIGMAP, ""))


@dataclass(slots=True)
class KaiResult:
    """The KAI part of one build step: sharers' assignments, the reserved GPUs, what stayed unknown."""

    assignments: list[Assignment]
    gpus: set[str]  # every GPU a reservation pod holds (shared or not): sharing mode ``kai``
    unresolved: list[str]


def kai_assignments(held: Iterable[ContainerDevices], *, reservations: Mapping[PodKey, str],
                    sharers: Sequence[KaiSharer], portions: Mapping[PodKey, float],
                    gpu_memory_mib: Callable[[str], float | None], dcgm_keys: set[tuple[str, str]],
                    model_of: Callable[[str], str | None]) -> KaiResult:
    """One assignment per (sharer, reserved GPU of its group), of its portion; the reservation holds nothing.

    ``held`` is the reservation pods' entries only; ``portions`` the ``GPU_PORTION`` read for memory pods.
    A memory pod whose portion nobody wrote and whose GPU's memory is unknown is unresolved, not charged."""
    out = KaiResult([], set(), [])
    by_group: dict[str, list[KaiSharer]] = {}
    for s in sharers:
        for g in s.groups:
            by_group.setdefault(g, []).append(s)
    for cd in held:
        group = reservations.get((cd.namespace, cd.pod), "")
        for raw in cd.device_ids:
            d = parse_device_id(raw)
            if d.kind is not DeviceKind.GPU:
                continue
            gpu = d.physical
            out.gpus.add(gpu)
            key = (gpu, "")
            for s in sorted(by_group.get(group, []) if group else [], key=lambda s: (s.namespace, s.pod)):
                portion = s.fraction if s.fraction is not None else portions.get((s.namespace, s.pod))
                if portion is None and s.memory_mib is not None:
                    memory = gpu_memory_mib(gpu)
                    portion = min(1.0, s.memory_mib / memory) if memory else None
                if portion is None:
                    out.unresolved.append(f"{s.namespace}/{s.pod}/{gpu}")
                    continue
                out.assignments.append(Assignment(
                    s.namespace, s.pod, s.container, gpu, DeviceKind.REPLICA, gpu, key if key in dcgm_keys else None,
                    model_of(gpu), None, portion, SharingMode.KAI))
    return out
