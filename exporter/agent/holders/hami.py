"""HAMi vGPU allocations, read from the pod annotation HAMi's scheduler writes.

HAMi's device plugin registers fake IDs (``GPU-<uuid>-<k>``) with the kubelet and ignores the
kubelet's pick in ``Allocate``, so the IDs pod-resources lists can name the wrong GPU. The annotation
``hami.io/vgpu-devices-allocated`` is the source of truth: per container, ``;``-terminated, a list
of ``<UUID>,<Type>,<memory MiB>,<cores %>:`` entries. Containers are in HAMi's order: init
containers then regular ones (HAMi >= 2.9), regular ones only before.

Pure and total: any text either parses or raises ``HamiError`` (fuzzed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANNOTATION = "hami.io/vgpu-devices-allocated"
_MIG_SUFFIX = re.compile(r"\[\d+-\d+\]$")  # HAMi MIG mode appends [<template>-<position>] to the UUID
_MAX_INT = 1 << 31


class HamiError(ValueError):
    """An annotation that is not in HAMi's format; the message names the offending part."""


@dataclass(frozen=True, slots=True)
class HamiDevice:
    """One vGPU share of one physical GPU held by one container."""

    uuid: str  # the physical GPU (MIG-mode suffix removed)
    vendor: str  # "NVIDIA"
    memory_mib: int
    cores_percent: int  # 0 = no core limit requested


def _int(text: str, what: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise HamiError(f"{what} {text!r} is not a non-negative integer")
    value = int(text)
    if value >= _MAX_INT:
        raise HamiError(f"{what} {text!r} is out of range")
    return value


def _device(entry: str) -> HamiDevice:
    parts = entry.split(",")
    if len(parts) != 4:
        raise HamiError(f"device entry {entry[:80]!r} has {len(parts)} fields, expected 4")
    uuid, vendor, mem, cores = (p.strip() for p in parts)
    uuid = _MIG_SUFFIX.sub("", uuid)
    if not uuid.startswith("GPU-"):
        raise HamiError(f"device entry {entry[:80]!r}: {uuid[:60]!r} is not a GPU UUID")
    return HamiDevice(uuid, vendor, _int(mem, "memory"), _int(cores, "cores"))


def parse_allocation(text: str) -> list[list[HamiDevice]]:
    """The annotation as one device list per container slot, in HAMi's container order."""
    if not text.endswith(";"):
        raise HamiError("annotation does not end with ';'")
    out: list[list[HamiDevice]] = []
    for slot in text[:-1].split(";"):
        out.append([_device(e) for e in slot.split(":") if e.strip()])
    return out


def by_container(slots: list[list[HamiDevice]], *, init_containers: list[str],
                 containers: list[str]) -> dict[str, list[HamiDevice]]:
    """Name each slot: init + regular containers (HAMi >= 2.9) or regular only (older), by slot count."""
    if len(slots) == len(init_containers) + len(containers):
        names = [*init_containers, *containers]
    elif len(slots) == len(containers):
        names = list(containers)
    else:
        raise HamiError(f"{len(slots)} container slots for a pod with {len(init_containers)} init and "
                        f"{len(containers)} containers")
    return {name: devs for name, devs in zip(names, slots, strict=True) if devs}


def hami_fraction(dev: HamiDevice, *, framebuffer_mib: float | None) -> float | None:
    """max(memory / physical framebuffer, cores / 100); memory alone when cores is 0; at most 1.

    None when the share holds memory and the GPU's physical framebuffer is unknown: its memory part is then
    unknown too, and the cores part alone would understate the share whenever memory is the larger.
    """
    cores = min(dev.cores_percent, 100) / 100.0
    if framebuffer_mib is None or framebuffer_mib <= 0:
        return cores if cores > 0 and dev.memory_mib == 0 else None
    return min(1.0, max(dev.memory_mib / framebuffer_mib, cores))
