"""AMD Instinct: ROCm device-metrics-exporter series as device records, whole GPUs and compute partitions.

The exporter's names may carry an operator-set prefix (``amd_gpu_gfx_activity``), so a family is
recognised by how its name ends. Units are the exporter's (percent, MB of 2^20 bytes as amd-smi counts
them, W, accumulated microjoules) and are converted to the product's (ratio, bytes, W, J).

A compute partition (CPX/QPX/DPX) is keyed by its physical GPU and its ``gpu_partition_id``. The
exporter reports utilisation and power for partition 0 only ("amdsmi does not return per-partition
activity data"), so the other partitions are unmeasured, never 0 and never partition 0's value. A
virtual function without serial number or UUID cannot be told apart from the next VF plumbed at the
same index, so its reading is not trusted either: unmeasured. Energy is kept once per physical GPU.

Pure and total: bad values, duplicates and missing labels are refused and counted, never raised.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.model.samples import Sample

VENDOR = "amd"
MIB = 1048576.0
#: Family name (without prefix) -> (quantity, multiplier to the product's unit).
AMD_NAMES: dict[str, tuple[str, float]] = {
    "gpu_gfx_activity": ("util", 0.01),
    "gpu_used_vram": ("fb_used", MIB),
    "gpu_free_vram": ("fb_free", MIB),
    "gpu_power_usage": ("power", 1.0),
    "gpu_package_power": ("power", 1.0),
    "gpu_average_package_power": ("power", 1.0),
    "gpu_energy_consumed": ("energy", 1e-6),
    "gpu_edge_temperature": ("temp", 1.0),
}
#: Compute partitions per GPU by partition mode (MI300-series: 8 XCDs).
PARTITIONS = {"spx": 1, "dpx": 2, "qpx": 4, "cpx": 8}
#: Quantities the exporter gives for partition 0 only.
_PARTITION0_ONLY = {"util", "power", "energy"}
_GPU_ID_LABEL = re.compile(r'[{,]gpu_id="')


def looks_like_amd(text: str) -> bool:
    """Whether an exposition body is device-metrics-exporter's: its GPU series carry ``gpu_id`` (DCGM's ``gpu``),
    and its node family is ``gpu_nodes_total``."""
    return "DCGM_FI_" not in text and (_GPU_ID_LABEL.search(text) is not None or "gpu_nodes_total{" in text)


def base_name(name: str) -> str | None:
    """The family a (possibly prefixed) name reads, e.g. ``amd_gpu_gfx_activity`` -> ``gpu_gfx_activity``."""
    for base in AMD_NAMES:
        if name == base or name.endswith("_" + base):
            return base
    return None


@dataclass(slots=True)
class AmdScrape:
    """One scrape's devices, and the samples refused (bad value, duplicate, no device identity)."""

    devices: dict[tuple[str, str], DcgmDevice] = field(default_factory=dict)
    refused: int = 0


def _is_zero_uuid(uuid: str) -> bool:
    return uuid.replace("0", "").replace("-", "") == ""


@dataclass(frozen=True, slots=True)
class _Where:
    """Which device a series belongs to and whether its readings are trusted."""

    key: tuple[str, str]
    index: str
    partitions: int
    partition: int | None  # None: a whole GPU
    trusted: bool  # False: a VF with neither serial nor UUID


def _where(labels: dict[str, str]) -> _Where | None:
    gpu_id = labels.get("gpu_id", "")
    if not gpu_id.isascii() or not gpu_id.isdigit() or len(gpu_id) > 6:
        return None
    mode = labels.get("gpu_compute_partition_type", "").lower()
    count = PARTITIONS.get(mode, 1)
    raw_part = labels.get("gpu_partition_id", "")
    serial = labels.get("serial_number", "").strip()
    uuid = labels.get("gpu_uuid", "").strip()
    uuid = "" if _is_zero_uuid(uuid) else uuid
    if count > 1 and raw_part.isascii() and raw_part.isdigit() and len(raw_part) <= 3 and int(raw_part) < count:
        part = int(raw_part)
        first = int(gpu_id) - part  # the GPU's partitions have consecutive gpu_id, partition 0 first
        physical = f"amd:{serial}" if serial else f"amd:gpu{first}"
        return _Where((physical, str(part)), str(first), count, part, True)
    physical = uuid or (f"amd:{serial}" if serial else f"amd:gpu{gpu_id}")
    return _Where((physical, ""), gpu_id, 1, None, bool(serial or uuid))


def _model(labels: dict[str, str]) -> str | None:
    return labels.get("card_series", "").strip() or labels.get("card_model", "").strip() or None


def amd_devices(samples: Iterable[Sample]) -> AmdScrape:
    """Group device-metrics-exporter samples into devices; families other than ``AMD_NAMES`` only name them."""
    out = AmdScrape()
    seen: dict[tuple[tuple[str, str], str], float] = {}
    for s in samples:
        labels = s.labels
        if "gpu_id" not in labels:
            continue  # node-level families (gpu_nodes_total), the exporter's own metrics
        where = _where(labels)
        if where is None:
            out.refused += 1
            continue
        dev = out.devices.get(where.key)
        if dev is None:
            dev = out.devices[where.key] = DcgmDevice(
                gpu_uuid=where.key[0], index=where.index, model=_model(labels),
                gpu_instance_id=where.key[1] or None, vendor=VENDOR, partitions=where.partitions)
        dev.model = dev.model or _model(labels)
        ns, pod, ctr = (labels.get(k, "") for k in ("namespace", "pod", "container"))
        if ns and pod:
            dev.pods.add((ns, pod, ctr))
        base = base_name(s.name)
        if base is None:
            continue
        quantity, scale = AMD_NAMES[base]
        value = s.value
        if math.isnan(value) or math.isinf(value) or value < 0:
            dev.bad_readings += 1
            out.refused += 1
            continue
        if quantity in _PARTITION0_ONLY and (where.partition not in (None, 0) or not where.trusted):
            continue  # the exporter does not give it: unmeasured, not its 0 nor partition 0's value
        slot = (where.key, quantity)
        if slot in seen:  # the same reading twice: only an identical one is kept
            out.refused += 1
            if seen[slot] != value:
                setattr(dev, quantity, None)
            continue
        seen[slot] = value
        setattr(dev, quantity, value * scale)
    return out
