"""Device identities as the NVIDIA device plugin and DCGM Exporter spell them, and their GPU fractions."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

#: Compute slices of a whole GPU by model family. A MIG profile "Ng.*" holds N of them.
#: A30 GPUs have four slices; A100/H100/H200/B200/GB200 have seven.
_FOUR_SLICE_MODELS = ("A30",)
_FOUR_SLICE_PROFILES = {"1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb", "1g.12gb+gfx"}
_PROFILE_RE = re.compile(r"^(\d+)g\.(\d+)gb")
#: HAMi's device plugin registers ``<GPU uuid>-<k>`` per vGPU slot (the kubelet's pick may name the wrong GPU).
_HAMI_ID_RE = re.compile(r"^(GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})-(\d+)$")


class DeviceKind(StrEnum):
    """What a pod-resources device ID names."""

    GPU = "gpu"  # a whole physical GPU
    REPLICA = "replica"  # a fractional share of a physical GPU (time-slicing, MPS, HAMi vGPU) sharing its busy time
    MIG = "mig"  # a MIG GPU instance
    OTHER = "other"  # an ID in a form we do not recognise (other vendors)


class SharingMode(StrEnum):
    """How a physical GPU is shared, as the agent labels its device metrics (``sharing=...``)."""

    NONE = "none"  # whole GPUs and MIG instances: each held by one container
    TIME_SLICING = "time-slicing"  # device-plugin replicas, time-sliced
    MPS = "mps"  # device-plugin replicas served by an MPS daemon (node label nvidia.com/gpu.sharing-strategy=mps)
    HAMI = "hami"  # HAMi vGPU: memory/core shares written in the pod annotation
    DRA = "dra"  # allocated through Dynamic Resource Allocation claims
    KAI = "kai"  # KAI Scheduler fractions: a reservation pod holds the GPU, the pods of its GPU group share it


@dataclass(frozen=True, slots=True)
class DeviceId:
    """A parsed device-plugin ID.

    ``physical`` is the GPU UUID for whole GPUs and replicas, the MIG UUID for MIG instances
    (whose parent cannot be read from the ID alone), and the raw ID otherwise.
    """

    raw: str
    kind: DeviceKind
    physical: str
    replica: int | None = None


def device_kind(raw: str) -> DeviceKind:
    """``parse_device_id(raw).kind`` without building the ID: booking asks it once per holder per tick, and a
    cache of it thrashed once a shard held more devices than the cache's size."""
    if raw.startswith("MIG-"):
        return DeviceKind.MIG
    if raw.startswith("GPU-"):
        return DeviceKind.REPLICA if "::" in raw else DeviceKind.GPU
    return DeviceKind.OTHER


def parse_device_id(raw: str) -> DeviceId:
    """Normalise one ID from ``ContainerDevices.device_ids``.

    Forms: ``GPU-<uuid>``, ``GPU-<uuid>::<n>`` (time-slicing/MPS replica n), ``MIG-<uuid>`` and
    ``MIG-<uuid>::<n>`` (a shared MIG instance: the replica part is dropped for identity).
    """
    base, sep, rest = raw.partition("::")
    replica = int(rest) if sep and rest.isdigit() else None
    if base.startswith("MIG-"):
        return DeviceId(raw, DeviceKind.MIG, base, replica)
    if base.startswith("GPU-"):
        if sep:
            return DeviceId(raw, DeviceKind.REPLICA, base, replica)
        return DeviceId(raw, DeviceKind.GPU, base)
    return DeviceId(raw, DeviceKind.OTHER, raw, replica)


def hami_device_gpu(raw: str) -> str | None:
    """The GPU UUID inside a HAMi plugin ID ``GPU-<uuid>-<k>``; None for any other form."""
    match = _HAMI_ID_RE.match(raw)
    return match.group(1) if match else None


def gpu_slices(model: str | None, profile: str | None = None) -> int:
    """Number of compute slices of a whole GPU of ``model`` (7 unless known to be 4)."""
    if model and any(token in model for token in _FOUR_SLICE_MODELS):
        return 4
    if model is None and profile is not None and profile in _FOUR_SLICE_PROFILES:
        return 4
    return 7


def profile_slices(profile: str) -> int:
    """Compute slices a MIG profile holds: ``3g.40gb`` -> 3. Raises ``ValueError`` when unparseable."""
    match = _PROFILE_RE.match(profile)
    if not match:
        raise ValueError(f"not a MIG profile: {profile!r}")
    return int(match.group(1))


def mig_fraction(profile: str, model: str | None) -> float:
    """Share of a whole GPU a MIG instance of ``profile`` on a GPU of ``model`` holds (3g on H100 = 3/7)."""
    return profile_slices(profile) / gpu_slices(model, profile)


def mig_profile_from_resource(resource: str) -> str | None:
    """``nvidia.com/mig-3g.40gb`` -> ``3g.40gb``; anything else -> None."""
    prefix = "nvidia.com/mig-"
    return resource[len(prefix) :] if resource.startswith(prefix) else None
