"""Turn parsed DCGM samples into one record per device (a whole GPU or a MIG instance).

Metrics are recognised by what they measure through one name table covering the classic names
(utilisation in %, framebuffer in MiB, energy in mJ), the unit-suffixed names of DCGM 4.7 / DCGM
Exporter 4.9 (ratios, bytes, joules) and the lowercase 1.x-compatibility names. The table is
extensible from settings so an exporter upgrade never silently zeroes the bill.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from exporter.model.samples import Sample

#: metric name -> (quantity, multiplier to our base unit: ratio, bytes, watts, joules, celsius)
DEFAULT_NAME_TABLE: dict[str, tuple[str, float]] = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gr_engine", 1.0),
    "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO": ("gr_engine", 1.0),
    "DCGM_FI_DEV_GPU_UTIL": ("util", 0.01),
    "DCGM_FI_DEV_GPU_UTIL_RATIO": ("util", 1.0),
    "dcgm_gpu_utilization": ("util", 0.01),
    "DCGM_FI_DEV_FB_USED": ("fb_used", 1048576.0),
    "DCGM_FI_DEV_FB_USED_BYTES": ("fb_used", 1.0),
    "dcgm_fb_used": ("fb_used", 1048576.0),
    "DCGM_FI_DEV_FB_FREE": ("fb_free", 1048576.0),
    "DCGM_FI_DEV_FB_FREE_BYTES": ("fb_free", 1.0),
    "dcgm_fb_free": ("fb_free", 1048576.0),
    "DCGM_FI_DEV_POWER_USAGE": ("power", 1.0),
    "DCGM_FI_DEV_BOARD_POWER_WATTS": ("power", 1.0),
    "DCGM_FI_DEV_POWER_USAGE_WATTS": ("power", 1.0),
    "dcgm_power_usage": ("power", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy", 0.001),
    "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL": ("energy", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_JOULES": ("energy", 1.0),
    "dcgm_total_energy_consumption": ("energy", 0.001),
    "DCGM_FI_DEV_GPU_TEMP": ("temp", 1.0),
    "DCGM_FI_DEV_GPU_TEMP_CELSIUS": ("temp", 1.0),
    "dcgm_gpu_temp": ("temp", 1.0),
}
QUANTITIES = {"gr_engine", "util", "fb_used", "fb_free", "power", "energy", "temp"}

_POD_LABELS = (("namespace", "pod", "container"), ("exported_namespace", "exported_pod", "exported_container"),
               ("pod_namespace", "pod_name", "container_name"))


#: What a DCGM field measures, from the stem of its name (checked in order).
_STEMS = (("GR_ENGINE_ACTIVE", "gr_engine"), ("GR_ENGINE_UTIL", "gr_engine"), ("GPU_UTIL", "util"),
          ("FB_USED", "fb_used"), ("FB_FREE", "fb_free"), ("TOTAL_ENERGY", "energy"), ("GPU_ENERGY", "energy"),
          ("ENERGY_CONSUMPTION", "energy"), ("POWER_USAGE", "power"), ("BOARD_POWER", "power"),
          ("GPU_TEMP", "temp"))
#: Fields that share a stem but measure something else (limits, thresholds, violations, sample counts).
_NOT_THE_QUANTITY = ("LIMIT", "MGMT", "ENFORCED", "VIOLATION", "THRESHOLD", "SLOWDOWN", "SHUTDOWN", "SAMPLES",
                     "MEM_COPY", "_MAX", "_MIN", "_AVG", "TARGET")
#: Its unit, from the name's suffix, else from the HELP text: multiplier to our base units.
_SUFFIX_SCALE = (("_RATIO", 1.0), ("_PERCENT", 0.01), ("_PCT", 0.01), ("_BYTES", 1.0), ("_MIB", 1048576.0),
                 ("_MILLIJOULES", 0.001), ("_JOULES_TOTAL", 1.0), ("_JOULES", 1.0), ("_WATTS", 1.0),
                 ("_CELSIUS", 1.0))
_HELP_SCALE = (("(in %)", 0.01), ("ratio", 1.0), ("(in mib)", 1048576.0), ("(in mb)", 1048576.0),
               ("(in bytes)", 1.0), ("(in mj)", 0.001), ("(in j)", 1.0), ("joules", 1.0), ("(in w)", 1.0),
               ("(in c)", 1.0), ("°c", 1.0))


def infer_name_entry(name: str, help_text: str = "") -> tuple[str, float] | None:
    """Recognise an unlisted DCGM field (e.g. a renamed one after an exporter upgrade) by its name's stem
    and its unit by suffix or HELP text. None when either is unknown: a unit is never guessed."""
    upper = name.upper()
    if not upper.startswith("DCGM_FI_"):
        return None
    quantity = next((q for stem, q in _STEMS if stem in upper), None)
    if quantity is None or any(word in upper for word in _NOT_THE_QUANTITY):
        return None
    scale = next((s for suffix, s in _SUFFIX_SCALE if upper.endswith(suffix)), None)
    if scale is None:
        low = help_text.lower()
        scale = next((s for marker, s in _HELP_SCALE if marker in low), None)
    return None if scale is None else (quantity, scale)


def extend_name_table(table: dict[str, tuple[str, float]], helps: dict[str, str]) -> list[str]:
    """Add inferable entries for families seen in a scrape but missing from ``table``; return their names."""
    added = []
    for name, help_text in helps.items():
        if name not in table:
            entry = infer_name_entry(name, help_text)
            if entry is not None:
                table[name] = entry
                added.append(name)
    return added


def parse_name_table(spec: str) -> dict[str, tuple[str, float]]:
    """Settings form ``NAME=quantity:scale,...`` -> table entries. Raises ValueError naming the entry."""
    table: dict[str, tuple[str, float]] = {}
    for entry in filter(None, (e.strip() for e in spec.split(","))):
        name, sep, rest = entry.partition("=")
        quantity, _, scale = rest.partition(":")
        if not sep or quantity not in QUANTITIES:
            raise ValueError(f"bad metric-name entry {entry!r}: expected NAME=quantity[:scale], quantity in "
                             f"{sorted(QUANTITIES)}")
        table[name.strip()] = (quantity, float(scale) if scale else 1.0)
    return table


@dataclass(slots=True)
class DcgmDevice:
    """One device as DCGM Exporter reports it: a whole GPU, or one MIG GPU instance of a GPU."""

    gpu_uuid: str
    index: str
    model: str | None
    gpu_instance_id: str | None = None
    mig_profile: str | None = None
    gr_engine: float | None = None
    util: float | None = None
    fb_used: float | None = None
    fb_free: float | None = None
    power: float | None = None
    energy: float | None = None
    temp: float | None = None
    pods: set[tuple[str, str, str]] = field(default_factory=set)
    bad_readings: int = 0
    vendor: str = "nvidia"  # whose exporter reported it: nvidia, amd, gaudi (a label of the device metrics)
    partitions: int = 1  # compute partitions its GPU is split into (AMD CPX 8, QPX 4, DPX 2); 1 = whole

    @property
    def key(self) -> tuple[str, str]:
        """(GPU UUID, GPU instance id; "" for a whole GPU): how DCGM readings and assignments meet."""
        return (self.gpu_uuid, self.gpu_instance_id or "")

    @property
    def utilization_raw(self) -> float | None:
        """GR engine activity where present (works per MIG instance), else GPU_UTIL; may be out of range."""
        return self.gr_engine if self.gr_engine is not None else self.util


def build_devices(samples: list[Sample], table: dict[str, tuple[str, float]] | None = None) -> dict[
        tuple[str, str], DcgmDevice]:
    """Group samples by (GPU UUID, GPU instance id). Samples without a UUID are ignored."""
    names = table or DEFAULT_NAME_TABLE
    devices: dict[tuple[str, str], DcgmDevice] = {}
    for s in samples:
        labels = s.labels
        uuid = labels.get("UUID") or labels.get("uuid") or labels.get("gpu_uuid")
        if not uuid:
            continue
        gi = labels.get("GPU_I_ID") or None
        key = (uuid, gi or "")
        dev = devices.get(key)
        if dev is None:
            dev = devices[key] = DcgmDevice(
                gpu_uuid=uuid,
                index=labels.get("gpu", ""),
                model=labels.get("modelName") or labels.get("model_name") or None,
                gpu_instance_id=gi,
                mig_profile=labels.get("GPU_I_PROFILE") or None,
            )
        for ns_l, pod_l, ctr_l in _POD_LABELS:
            pod = labels.get(pod_l)
            if pod:
                dev.pods.add((labels.get(ns_l, ""), pod, labels.get(ctr_l, "")))
                break
        spec = names.get(s.name)
        if spec is None or "pod_uid" in labels:  # a pod's own series (per-process), not the device's reading
            continue
        quantity, scale = spec
        value = s.value
        if math.isnan(value) or math.isinf(value):
            dev.bad_readings += 1
            continue
        # The ratio form wins over the % form for the same quantity only when it comes first; both
        # describe the same thing, so whichever is present is used.
        setattr(dev, quantity, value * scale)
    return devices
