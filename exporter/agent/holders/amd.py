"""Who holds which AMD GPU or compute partition: pod-resources' ``amd.com/*`` IDs joined to the exporter.

The ROCm device plugin gives the kubelet sysfs names: the PCI address for a whole GPU or a GPU's first
partition (``0000:19:00.0``) and ``amdgpu_xcp_<N>`` for its other compute partitions, under
``amd.com/gpu`` (naming strategy ``single``) or one resource per partition style such as
``amd.com/cpx_nps4`` (``mixed``). What a container holds (and so its allocation) comes from those IDs;
which exporter series is that device comes from the exporter's own ``pod``/``namespace``/``container``
labels, since its series carry no PCI address. A hold the exporter does not label is allocated and
unmeasured. A partition's fraction is 1 / partitions of its GPU: from the mixed resource's name, else
the joined series' partition mode, else the allocatable IDs (partition IDs per PCI address).
"""

from __future__ import annotations

from collections.abc import Mapping

from exporter.agent.exporters.amd import PARTITIONS, VENDOR
from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.agent.holders.assignment import Assignment
from exporter.model.devices import DeviceKind
from exporter.model.pod_resources import ContainerDevices

AMD_RESOURCE_PREFIX = "amd.com/"
XCP_PREFIX = "amdgpu_xcp_"


def is_amd_resource(resource: str) -> bool:
    """Resources the ROCm device plugin advertises (any naming strategy)."""
    return resource.startswith(AMD_RESOURCE_PREFIX)


def resource_partitions(resource: str) -> int | None:
    """Partitions per GPU a ``mixed``-strategy resource names (``amd.com/cpx_nps4`` -> 8); None when it does not."""
    style = resource[len(AMD_RESOURCE_PREFIX):].split("_", 1)[0].lower()
    return PARTITIONS.get(style)


def allocatable_partitions(ids: tuple[str, ...]) -> int | None:
    """Partitions per GPU from a resource's allocatable IDs: all of them per PCI address (64 / 8 = 8 in CPX)."""
    gpus = sum(1 for i in ids if not i.lower().startswith(XCP_PREFIX))
    if gpus == 0:
        return None
    per_gpu = round(len(ids) / gpus)
    return per_gpu if per_gpu in PARTITIONS.values() else None


def _index(dev: DcgmDevice) -> tuple[int, str]:
    return (int(dev.index) if dev.index.isdigit() else 1 << 30, dev.gpu_instance_id or "")


def amd_assignments(held: list[ContainerDevices], devices: Mapping[tuple[str, str], DcgmDevice], *,
                    allocatable: Mapping[str, tuple[str, ...]] | None,
                    fallback_model: str | None, unresolved: list[str]) -> list[Assignment]:
    """One assignment per held ``amd.com/*`` ID. Pure. An ``amdgpu_xcp_N`` ID whose partition count no source
    gives is charged as the smallest partition (1/8) and listed in ``unresolved``.

    A container's IDs are paired, in order, with the exporter's devices labelled with that container; the
    pairing inside one container may swap two of its own devices, never another container's."""
    amd = {k: d for k, d in devices.items() if d.vendor == VENDOR}
    out: list[Assignment] = []
    for cd in sorted(held, key=lambda c: (c.namespace, c.pod, c.container, c.resource)):
        if not is_amd_resource(cd.resource):
            continue
        mine = sorted((k for k, d in amd.items() if (cd.namespace, cd.pod, cd.container) in d.pods),
                      key=lambda k: _index(amd[k]))
        counted = resource_partitions(cd.resource) or allocatable_partitions((allocatable or {}).get(cd.resource, ()))
        for pos, raw in enumerate(sorted(cd.device_ids)):
            key = mine[pos] if pos < len(mine) else None
            dev = amd[key] if key is not None else None
            parts = counted or (dev.partitions if dev is not None else None)
            if parts is None and raw.lower().startswith(XCP_PREFIX):
                unresolved.append(raw)
                parts = max(PARTITIONS.values())
            parts = parts or 1
            kind = DeviceKind.GPU if parts == 1 else DeviceKind.MIG
            model = dev.model if dev is not None and dev.model else fallback_model
            out.append(Assignment(cd.namespace, cd.pod, cd.container, raw, kind,
                                  dev.gpu_uuid if dev is not None else raw, key, model, None, 1.0 / parts))
    return out
