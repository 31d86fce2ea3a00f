"""AMD and Gaudi nodes' devices as their device plugins name them to the kubelet.

AMD (ROCm k8s-device-plugin, naming strategy ``single``): ``amd.com/gpu`` IDs are sysfs names, the PCI
address of a whole GPU or of a partitioned GPU's first partition, and ``amdgpu_xcp_<N>`` for its other
partitions, N counting up across the node's GPUs from 1. Gaudi (Habana device plugin): ``habana.ai/gaudi``
IDs are the cards' serial numbers.
"""

from __future__ import annotations

import hashlib
import uuid as uuidlib
from dataclasses import dataclass

from exporter.sim.spec import NodeSpec
from exporter.sim.vendors.fields import PARTITIONS

_NS = uuidlib.UUID("0c7a5a43-3f2e-4d1b-9b64-1f6f2c8d1e55")


def amd_gpu_uuid(node: str, index: int) -> str:
    """The ``gpu_uuid`` device-metrics-exporter labels a GPU with (stable per node and index)."""
    return str(uuidlib.uuid5(_NS, f"{node}/amd{index}"))


def serial(node: str, index: int, *, prefix: str) -> str:
    """A card's serial number, stable per node and index."""
    digest = int(hashlib.sha1(f"{node}/{index}".encode()).hexdigest()[:8], 16)
    return f"{prefix}{digest % 10**9:09d}"


@dataclass(frozen=True, slots=True)
class VendorGpu:
    """One GPU or card: the key the utilisation model reads it by (its device ID when whole), its PCI address and,
    when partitioned, its partitions' device IDs (partition 0 first)."""

    index: int
    key: str
    pci: str
    partitions: tuple[str, ...] = ()


def vendor_devices(spec: NodeSpec) -> tuple[list[VendorGpu], dict[str, list[str]]]:
    """The GPUs and the resource's IDs in allocation order."""
    gpus: list[VendorGpu] = []
    ids: list[str] = []
    if spec.vendor == "gaudi":
        for i in range(spec.gpus):
            card = serial(spec.name, i, prefix="AM")
            gpus.append(VendorGpu(i, card, f"0000:{0x19 + i * 0x10:02x}:00.0"))
            ids.append(card)
        return gpus, {"habana.ai/gaudi": ids}
    per_gpu = PARTITIONS[spec.partition or "spx"]
    xcp = 1
    for i in range(spec.gpus):
        pci = f"0000:{0x05 + i * 0x10:02x}:00.0"
        if per_gpu == 1:
            gpus.append(VendorGpu(i, pci, pci))
            ids.append(pci)
            continue
        parts = [pci, *(f"amdgpu_xcp_{xcp + k}" for k in range(per_gpu - 1))]
        xcp += per_gpu - 1
        gpus.append(VendorGpu(i, amd_gpu_uuid(spec.name, i), pci, tuple(parts)))
        ids.extend(parts)
    return gpus, {"amd.com/gpu": ids}
