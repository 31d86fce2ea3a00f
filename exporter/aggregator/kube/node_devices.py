"""The NVIDIA devices a node's kubelet advertises (``status.allocatable``): MIG instances per profile
(``nvidia.com/mig-1g.10gb``, the mixed strategy), whole GPUs or replicas (``nvidia.com/gpu``) and renamed
shared replicas (``nvidia.com/gpu.shared``). Labels alone do not say how a GPU was carved."""

from __future__ import annotations

import re
from typing import Any

_NVIDIA_DEVICE = re.compile(r"^nvidia\.com/(gpu|gpu\.shared|mig-\d+g\.\d+gb.*)$")


def allocatable_devices(obj: dict[str, Any]) -> dict[str, int]:
    """The node object's allocatable NVIDIA device counts by resource name (unparseable counts left out)."""
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    out: dict[str, int] = {}
    for name, value in allocatable.items():
        if _NVIDIA_DEVICE.match(str(name)):
            try:
                count = int(str(value))
            except ValueError:
                continue
            if count > 0:
                out[str(name)] = count
    return out


def keep_devices(table: dict[str, dict[str, int]], etype: str, *, obj: dict[str, Any]) -> None:
    """Keep (or, for a deleted node, drop) the node's advertised devices, by node name."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    if etype == "DELETED":
        table.pop(name, None)
    else:
        table[name] = allocatable_devices(obj)
